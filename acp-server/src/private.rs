//! Private files and ownership checks, per platform (being written).
