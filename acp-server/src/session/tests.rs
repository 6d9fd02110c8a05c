//! Unit tests of the live session: record, turn tickets, replay.
