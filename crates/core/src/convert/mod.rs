//! Conversions between formats.
