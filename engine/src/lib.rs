//! placeholder filled by later issues
