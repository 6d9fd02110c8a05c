//! The macOS Seatbelt profile for sandboxed commands (being written).
