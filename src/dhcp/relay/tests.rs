//! Unit tests of [`super`] (relay).
