//! The index's SQLite file: its schema and version.
