//! Write rules and atomic installs (being written).
