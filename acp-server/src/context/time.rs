//! The time context (`[time]`, the catalog's `@deepseek-ai/dsh-time-context`):
//! the current date, time and time zone, given to the model as turn-only
//! context at the start of a turn (not in the system prompt, which stays
//! byte-stable for the provider's prefix cache), at most once per
//! `refresh_interval_ms` in a session.
//!
//! The one place dsh reads the wall clock for this is [`Clock::now`];
//! `DSH_FAKE_NOW` (a test hook, read with the configuration) fixes it.

use std::time::Duration;

use serde::Deserialize;

/// `[time]` as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimeSettings {
    /// Give the model the time at all (default: yes).
    pub enabled: Option<bool>,
    /// The IANA zone the time is shown in; unset: the process's zone (`TZ`,
    /// else `/etc/localtime`, else UTC).
    pub zone: Option<String>,
    /// Minimum milliseconds between two time contexts in a session; unset
    /// or 0: every turn.
    pub refresh_interval_ms: Option<u64>,
}

/// How the time context opens (what [`Clock::is_context`] looks for in a
/// session's log).
const OPEN: &str = "<system-reminder>\nCurrent time: ";

/// The validated `[time]`: the zone, the interval and the clock.
#[derive(Debug, Clone)]
pub struct Clock {
    enabled: bool,
    /// The zone: a configured one is looked up at load (to fail it
    /// there); the process's is looked up at the first time context, since
    /// finding its name may read the whole time zone database (about a
    /// millisecond, which `dsh acp`'s start-up does not pay).
    zone: std::sync::Arc<std::sync::OnceLock<jiff::tz::TimeZone>>,
    refresh: Duration,
    /// `DSH_FAKE_NOW`: the time shown instead of the wall clock's.
    fake: Option<jiff::Timestamp>,
}

impl Clock {
    /// `[time]` resolved: the zone looked up in the system's time zone
    /// database; `fake_now` is `DSH_FAKE_NOW` (RFC 3339).
    ///
    /// # Errors
    /// An unknown zone or an unreadable `DSH_FAKE_NOW`, naming it.
    pub fn new(settings: &TimeSettings, fake_now: Option<&str>) -> Result<Clock, String> {
        let zone = std::sync::Arc::new(std::sync::OnceLock::new());
        if let Some(name) = settings.zone.as_deref().map(str::trim) {
            let found = jiff::tz::TimeZone::get(name).map_err(|error| {
                format!("[time] zone {name:?} is not a known IANA time zone (such as \"Europe/Berlin\"): {error}")
            })?;
            let _ = zone.set(found);
        }
        let fake = fake_now
            .map(|text| {
                text.trim().parse::<jiff::Timestamp>().map_err(|error| {
                    format!("DSH_FAKE_NOW={text:?} is not an RFC 3339 time: {error}")
                })
            })
            .transpose()?;
        Ok(Clock {
            enabled: settings.enabled.unwrap_or(true),
            zone,
            refresh: Duration::from_millis(settings.refresh_interval_ms.unwrap_or(0)),
            fake,
        })
    }

    /// Now, as the time context shows it.
    pub fn now(&self) -> jiff::Timestamp {
        self.fake.unwrap_or_else(jiff::Timestamp::now)
    }

    /// Whether a turn starting at `now_ms` (epoch milliseconds) gets the
    /// time context, when the session's last one was recorded at `last_ms`.
    pub fn due(&self, last_ms: Option<u64>, now_ms: u64) -> bool {
        self.enabled
            && last_ms.is_none_or(|last| {
                u128::from(now_ms.saturating_sub(last)) >= self.refresh.as_millis()
            })
    }

    /// The time context for `now`: `Current time: Friday 2026-12-04 12:34
    /// (Europe/Berlin, UTC+01:00)` in a `<system-reminder>` block.
    pub fn context(&self, now: jiff::Timestamp) -> String {
        let zone = self
            .zone
            .get_or_init(|| jiff::tz::TimeZone::try_system().unwrap_or(jiff::tz::TimeZone::UTC));
        let shown = now
            .to_zoned_datetime(zone.clone())
            .strftime("%A %Y-%m-%d %H:%M (%:Q, UTC%:z)")
            .to_string();
        format!("{OPEN}{shown}\n</system-reminder>")
    }

    /// Whether a block of turn-only context is a time context.
    pub fn is_context(text: &str) -> bool {
        text.starts_with(OPEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clock(zone: Option<&str>, refresh_ms: Option<u64>) -> Result<Clock, String> {
        let settings = TimeSettings {
            enabled: None,
            zone: zone.map(str::to_owned),
            refresh_interval_ms: refresh_ms,
        };
        Clock::new(&settings, Some("2026-12-04T11:34:56Z"))
    }

    #[test]
    fn the_context_shows_the_time_in_the_configured_zone() {
        let berlin = clock(Some("Europe/Berlin"), None).unwrap();
        let text = berlin.context(berlin.now());
        assert_eq!(
            text,
            "<system-reminder>\nCurrent time: Friday 2026-12-04 12:34 (Europe/Berlin, UTC+01:00)\n</system-reminder>"
        );
        assert!(Clock::is_context(&text));
        assert!(!Clock::is_context(
            "<system-reminder>\nContext from hooks:\n"
        ));
        // Summer time.
        let summer = "2026-07-01T10:00:00Z".parse().unwrap();
        assert!(berlin
            .context(summer)
            .contains("Wednesday 2026-07-01 12:00 (Europe/Berlin, UTC+02:00)"));
        let kolkata = clock(Some("Asia/Kolkata"), None).unwrap();
        assert!(kolkata
            .context(kolkata.now())
            .contains("17:04 (Asia/Kolkata, UTC+05:30)"));
    }

    #[test]
    fn an_unknown_zone_or_fake_time_fails_the_load() {
        let error = clock(Some("Mars/Olympus"), None).unwrap_err();
        assert!(error.contains("[time] zone \"Mars/Olympus\""), "{error}");
        let error = Clock::new(&TimeSettings::default(), Some("yesterday")).unwrap_err();
        assert!(error.contains("DSH_FAKE_NOW=\"yesterday\""), "{error}");
        // No zone: the process's, whatever it is.
        assert!(Clock::new(&TimeSettings::default(), None).is_ok());
    }

    #[test]
    fn the_interval_spaces_the_contexts() {
        let every = clock(None, None).unwrap();
        assert!(every.due(None, 1000));
        assert!(every.due(Some(1000), 1000));
        let hourly = clock(None, Some(3_600_000)).unwrap();
        assert!(hourly.due(None, 1000));
        assert!(!hourly.due(Some(1000), 1000 + 3_599_999));
        assert!(hourly.due(Some(1000), 1000 + 3_600_000));
        // A clock that went back counts as no time passed.
        assert!(!hourly.due(Some(5000), 1000));
        let off = TimeSettings {
            enabled: Some(false),
            ..TimeSettings::default()
        };
        assert!(!Clock::new(&off, None).unwrap().due(None, 1000));
    }
}
