//! Walking and matching shared by the search tools (being written).
