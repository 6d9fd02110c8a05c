use super::*;
use crate::ids::SessionId;

fn line(value: serde_json::Value) -> String {
    format!("{value}\n")
}

fn header() -> String {
    line(
        serde_json::to_value(SessionHeader::new(
            SessionId::new("s1"),
            1,
            "/tmp".into(),
            vec![],
        ))
        .unwrap(),
    )
}

fn user(seq: u64, text: &str) -> String {
    let event = Event {
        seq,
        time: 0,
        ignorable: false,
        data: EventData::UserMessage {
            turn: 1,
            content: vec![UserContent::text(text)],
            steered: false,
            source: crate::log::MessageSource::User,
        },
    };
    format!("{}\n", serde_json::to_string(&event).unwrap())
}

#[test]
fn event_wire_shape() {
    let json = user(1, "hi");
    assert_eq!(
        json.trim(),
        r#"{"seq":1,"time":0,"type":"user/message","data":{"turn":1,"content":[{"type":"text","text":"hi"}]}}"#
    );
}

#[test]
fn torn_last_line_is_dropped() {
    let good = format!("{}{}", header(), user(1, "a"));
    let torn = format!("{good}{{\"seq\":2,\"time\":0,\"type\":\"user/mes");
    let parsed = parse_log(torn.as_bytes()).unwrap();
    assert_eq!(parsed.events.len(), 1);
    assert_eq!(parsed.valid_len, good.len());
}

#[test]
fn corrupt_middle_line_is_refused() {
    let log = format!("{}garbage\n{}", header(), user(2, "b"));
    let err = parse_log(log.as_bytes()).unwrap_err();
    assert_eq!(err.code, ErrorCode::SessionLogCorrupt);
    assert!(err.message.contains("line 2"), "{}", err.message);
}

#[test]
fn unknown_required_event_is_refused_and_ignorable_skipped() {
    let ignorable = line(
        serde_json::json!({"seq":2,"time":0,"type":"future/thing","data":{},"ignorable":true}),
    );
    let log = format!("{}{}{ignorable}{}", header(), user(1, "a"), user(3, "b"));
    let parsed = parse_log(log.as_bytes()).unwrap();
    assert_eq!(parsed.events.len(), 2);
    assert_eq!(parsed.last_seq, 3);

    let required = line(serde_json::json!({"seq":2,"time":0,"type":"future/thing","data":{}}));
    let log = format!("{}{}{required}", header(), user(1, "a"));
    let err = parse_log(log.as_bytes()).unwrap_err();
    assert_eq!(err.code, ErrorCode::SessionLogVersion);
    assert!(err.message.contains("future/thing"));
}

#[test]
fn newer_version_is_refused() {
    let mut header = SessionHeader::new(SessionId::new("s"), 0, "/".into(), vec![]);
    header.version = FORMAT_VERSION + 1;
    let err = parse_log(line(serde_json::to_value(header).unwrap()).as_bytes()).unwrap_err();
    assert_eq!(err.code, ErrorCode::SessionLogVersion);
}

/// Issue 11: typed fields read the strings older logs hold, and write
/// them the same way.
#[test]
fn typed_fields_keep_the_wire_strings() {
    let lines = [
        r#"{"seq":1,"time":0,"type":"session/config","data":{"key":"mode","value":"ask"}}"#,
        r#"{"seq":2,"time":0,"type":"session/config","data":{"key":"future_key","value":"x"}}"#,
        r#"{"seq":3,"time":0,"type":"turn/end","data":{"turn":1,"stop":"error","error":{"code":"model.server","message":"m"}}}"#,
        r#"{"seq":4,"time":0,"type":"turn/end","data":{"turn":2,"stop":"max_turn_requests"}}"#,
        r#"{"seq":5,"time":0,"type":"permission/decision","data":{"call_id":"c1","outcome":"allow_always"}}"#,
        r#"{"seq":6,"time":0,"type":"plan","data":{"entries":[{"content":"a","status":"in_progress"}]}}"#,
    ];
    let events: Vec<Event> = lines
        .iter()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert!(matches!(
        events[0].data,
        EventData::Config {
            key: ConfigKey::Mode,
            ..
        }
    ));
    assert!(matches!(
        events[1].data,
        EventData::Config {
            key: ConfigKey::Unknown,
            ..
        }
    ));
    assert!(matches!(
        events[2].data,
        EventData::TurnEnd { stop: None, .. }
    ));
    assert!(matches!(
        events[3].data,
        EventData::TurnEnd {
            stop: Some(StopReason::MaxTurnRequests),
            ..
        }
    ));
    assert!(matches!(
        events[4].data,
        EventData::PermissionDecision {
            outcome: PermissionOutcome::AllowAlways,
            ..
        }
    ));
    assert!(
        matches!(&events[5].data, EventData::Plan { entries } if entries[0].status == PlanStatus::InProgress && entries[0].priority == PlanPriority::Medium)
    );
    // (The plan line gains its default priority when written.)
    for (line, event) in lines
        .iter()
        .zip(&events)
        .filter(|(line, _)| !line.contains("future_key") && !line.contains("plan"))
    {
        let written = serde_json::to_value(event).unwrap();
        let read: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(written["data"], read["data"], "{line}");
    }
}
