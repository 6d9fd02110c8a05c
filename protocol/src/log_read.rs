//! Reading one event line straight into its type, in one pass.
//!
//! `Event` puts its payload beside `seq` and `time` (`#[serde(flatten)]`),
//! and serde reads a flattened struct by first copying the whole line into
//! an intermediate tree, then reading the fields out of that: for a long
//! session most of `session/load` went there. [`Event::from_json`] reads
//! the line's keys once instead: `seq`, `time` and `ignorable` are taken
//! aside as they come, and every other key goes on to `EventData`'s own
//! (adjacently tagged) deserializer, which reads `type` and then `data` in
//! place. A `data` that comes before `type` (a log whose keys were sorted)
//! is set aside as its raw text and handed over right after `type`: serde
//! would otherwise copy it into a tree first. It accepts what the derived
//! reader accepts; the log parser falls back to that one for anything
//! else.

use std::fmt;

use serde::de::{self, DeserializeSeed, IntoDeserializer, MapAccess, Visitor};
use serde::Deserialize;

use super::{Event, EventData};

impl Event {
    /// Parses one event line (see the module docs).
    ///
    /// # Errors
    /// Not JSON, not an object, a missing `seq` or `time`, or a payload
    /// its type does not accept.
    pub fn from_json(line: &[u8]) -> serde_json::Result<Event> {
        // UTF-8 checked once for the line, not string by string (a line
        // that is not UTF-8 is read as bytes, as the derived reader does).
        match std::str::from_utf8(line) {
            Ok(line) => read(serde_json::Deserializer::from_str(line)),
            Err(_) => read(serde_json::Deserializer::from_slice(line)),
        }
    }
}

fn read<'de, R: serde_json::de::Read<'de>>(
    mut deserializer: serde_json::Deserializer<R>,
) -> serde_json::Result<Event> {
    let event = de::Deserializer::deserialize_map(&mut deserializer, EventVisitor)?;
    deserializer.end()?;
    Ok(event)
}

struct EventVisitor;

/// `seq`, `time` and `ignorable`, taken aside while `EventData` reads the
/// rest.
#[derive(Default)]
struct Head {
    seq: Option<u64>,
    time: Option<u64>,
    ignorable: bool,
    ignorable_seen: bool,
}

impl<'de> Visitor<'de> for EventVisitor {
    type Value = Event;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a session log event")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Event, A::Error> {
        let mut head = Head::default();
        let data = EventData::deserialize(de::value::MapAccessDeserializer::new(Aside {
            map,
            head: &mut head,
            typed: false,
            early: None,
            early_next: false,
        }))?;
        Ok(Event {
            seq: head.seq.ok_or_else(|| de::Error::missing_field("seq"))?,
            time: head.time.ok_or_else(|| de::Error::missing_field("time"))?,
            ignorable: head.ignorable,
            data,
        })
    }
}

/// The event's map as `EventData` sees it: without `seq`, `time` and
/// `ignorable`, which go to `head`.
struct Aside<'h, 'de, A> {
    map: A,
    head: &'h mut Head,
    /// `type` was read.
    typed: bool,
    /// `data` read before `type`, handed over right after it.
    early: Option<&'de serde_json::value::RawValue>,
    /// The next value is `early`'s.
    early_next: bool,
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for Aside<'_, 'de, A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        loop {
            // `data` read early goes right after `type` (without one, the
            // derived reader refuses the event).
            if self.typed && self.early.is_some() {
                self.early_next = true;
                return seed
                    .deserialize(de::value::BorrowedStrDeserializer::new("data"))
                    .map(Some);
            }
            let Some(key) = self.map.next_key::<Key<'de>>()? else {
                return Ok(None);
            };
            match key.as_str() {
                "data" if !self.typed && self.early.is_some() => {
                    return Err(de::Error::duplicate_field("data"))
                }
                "data" if !self.typed => {
                    self.early = Some(self.map.next_value()?);
                    continue;
                }
                "type" => self.typed = true,
                _ => {}
            }
            match key.as_str() {
                // A repeated key is refused, as the derived reader does.
                "seq" if self.head.seq.is_some() => return Err(de::Error::duplicate_field("seq")),
                "time" if self.head.time.is_some() => {
                    return Err(de::Error::duplicate_field("time"))
                }
                "ignorable" if self.head.ignorable_seen => {
                    return Err(de::Error::duplicate_field("ignorable"))
                }
                "seq" => self.head.seq = Some(self.map.next_value()?),
                "time" => self.head.time = Some(self.map.next_value()?),
                "ignorable" => {
                    self.head.ignorable_seen = true;
                    self.head.ignorable = self.map.next_value()?;
                }
                _ => {
                    return match key {
                        Key::Borrowed(key) => seed
                            .deserialize(de::value::BorrowedStrDeserializer::new(key))
                            .map(Some),
                        Key::Owned(key) => seed.deserialize(key.into_deserializer()).map(Some),
                    }
                }
            }
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, A::Error> {
        if self.early_next {
            self.early_next = false;
            if let Some(raw) = self.early.take() {
                let mut data = serde_json::Deserializer::from_str(raw.get());
                let value = seed.deserialize(&mut data).map_err(de::Error::custom)?;
                data.end().map_err(de::Error::custom)?;
                return Ok(value);
            }
        }
        self.map.next_value_seed(seed)
    }
}

/// A key, borrowed from the line unless it had escapes.
enum Key<'de> {
    Borrowed(&'de str),
    Owned(String),
}

impl Key<'_> {
    fn as_str(&self) -> &str {
        match self {
            Key::Borrowed(key) => key,
            Key::Owned(key) => key,
        }
    }
}

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_borrowed_str<E: de::Error>(self, key: &'de str) -> Result<Key<'de>, E> {
                Ok(Key::Borrowed(key))
            }
            fn visit_str<E: de::Error>(self, key: &str) -> Result<Key<'de>, E> {
                Ok(Key::Owned(key.to_owned()))
            }
            fn visit_string<E: de::Error>(self, key: String) -> Result<Key<'de>, E> {
                Ok(Key::Owned(key))
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every golden event, in dsh's key order and in others, reads the
    /// same in one pass as through the derived reader.
    #[test]
    fn one_pass_reads_what_the_derived_reader_reads() {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/golden/events");
        let mut read = 0;
        for file in std::fs::read_dir(dir).unwrap() {
            let text = std::fs::read_to_string(file.unwrap().path()).unwrap();
            let value: serde_json::Value = serde_json::from_str(&text).unwrap();
            let expected: Event = serde_json::from_value(value.clone()).unwrap();
            // As dsh writes it, keys sorted (`data` first), and with the
            // payload before the type.
            let written = serde_json::to_vec(&expected).unwrap();
            let sorted = value.to_string();
            let object = value.as_object().unwrap();
            let mut reordered = serde_json::Map::new();
            for key in ["data", "time", "type", "seq", "ignorable"] {
                if let Some(field) = object.get(key) {
                    reordered.insert(key.to_owned(), field.clone());
                }
            }
            let reordered = serde_json::Value::Object(reordered).to_string();
            for line in [&written[..], sorted.as_bytes(), reordered.as_bytes()] {
                assert_eq!(Event::from_json(line).unwrap(), expected);
            }
            read += 1;
        }
        assert!(read >= 20);
    }

    #[test]
    fn one_pass_takes_escaped_keys_and_refuses_what_is_not_an_event() {
        let event = Event::from_json(
            br#"{"s\u0065q":3,"time":9,"ignorable":true,"type":"turn/start","data":{"turn":2}}"#,
        )
        .unwrap();
        assert_eq!((event.seq, event.time, event.ignorable), (3, 9, true));
        assert_eq!(event.data, EventData::TurnStart { turn: 2 });
        for bad in [
            &br#"{"time":9,"type":"turn/start","data":{"turn":2}}"#[..],
            br#"{"seq":1,"type":"turn/start","data":{"turn":2}}"#,
            br#"{"seq":1,"time":1,"type":"no/such","data":{}}"#,
            br#"{"seq":1,"time":1,"type":"turn/start","data":{"turn":"x"}}"#,
            br#"{"seq":1,"time":1,"type":"turn/start","data":{"turn":2}} trailing"#,
            br#"[1,2]"#,
            // A repeated key, as the derived reader refuses it.
            br#"{"seq":1,"seq":2,"time":1,"type":"turn/start","data":{"turn":2}}"#,
            br#"{"data":{"turn":2},"data":{"turn":2},"seq":1,"time":1,"type":"turn/start"}"#,
            br#"{"data":{"turn":2},"seq":1,"time":1,"type":"turn/start","data":{"turn":2}}"#,
            // `data` before a `type` that does not take it, or without one.
            br#"{"data":{"turn":"x"},"seq":1,"time":1,"type":"turn/start"}"#,
            br#"{"data":{"turn":2},"seq":1,"time":1}"#,
            br#"{"seq":1,"time":1,"time":2,"type":"turn/start","data":{"turn":2}}"#,
        ] {
            assert!(
                Event::from_json(bad).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
