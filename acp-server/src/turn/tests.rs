//! Unit tests of a turn with the scripted model.
