//! Paused-time tests of the renewal scheduler.
