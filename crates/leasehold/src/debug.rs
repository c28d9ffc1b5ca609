//! Bounded `Debug` output: a lock name can be a megabyte, and a guard must not print it.

use std::fmt;

/// The most characters of a key a `Debug` impl prints.
const MAX_SHOWN: usize = 64;

/// Prints a string escaped, cut to [`MAX_SHOWN`] characters with `…` when longer.
pub(crate) struct Bounded<'a>(pub(crate) &'a str);

impl fmt::Debug for Bounded<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.char_indices().nth(MAX_SHOWN) {
            None => fmt::Debug::fmt(self.0, f),
            Some((cut, _)) => write!(f, "{:?}… ({} bytes)", &self.0[..cut], self.0.len()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_keys_are_cut() {
        let long = "k".repeat(1 << 20);
        let shown = format!("{:?}", Bounded(&long));
        assert!(shown.len() < 100, "{shown}");
        assert_eq!(format!("{:?}", Bounded("a\nb")), "\"a\\nb\"");
    }
}
