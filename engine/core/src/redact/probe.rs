//! Whether a serializable value holds a secret, asked of the value itself: the strings
//! that `serde_json::to_value` would make of it are checked as serde hands them over,
//! with no tree of the value built (every record is checked, almost none holds one).
//! It answers as [`Redactor::json_holds_secret`] answers of the value's tree: the
//! strings checked are that tree's string values (a unit variant's name and a `char`
//! included) and its maps' keys; the first one holding a secret ends the walk. A
//! struct's field names and a variant's name made a key are keys of the tree too, which
//! the tree's check reads and the probe does not: they are the names cairn's own types
//! give, never data, and none holds a secret (the recorder's test on the sample logs
//! compares the two checks on every record).

use std::fmt;

use serde::ser::{self, Serialize};

use super::Redactor;

/// How a walk ends early: a string holds a secret, or the value's own `Serialize`
/// failed (then `serde_json` fails on it too, and says why).
#[derive(Debug)]
enum Stop {
    Secret,
    Failed,
}

impl fmt::Display for Stop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Stop::Secret => f.write_str("a string holds a secret"),
            Stop::Failed => f.write_str("the value does not serialize"),
        }
    }
}

impl std::error::Error for Stop {}

impl ser::Error for Stop {
    fn custom<T: fmt::Display>(_: T) -> Stop {
        Stop::Failed
    }
}

/// True when a string of `value`, as its JSON tree holds it, holds a secret. A value
/// that does not serialize holds none (its JSON cannot be made either).
///
/// `checked` is a string of `value` itself (the same bytes at the same address) that
/// the caller found to hold no secret with this redactor: it is not searched again.
/// Any other string, equal or not, is.
pub(super) fn holds_secret<T: Serialize + ?Sized>(
    r: &Redactor,
    value: &T,
    checked: Option<&str>,
) -> bool {
    let skip = checked.map(|c| (c.as_ptr() as usize, c.len()));
    matches!(value.serialize(Probe(r, skip)), Err(Stop::Secret))
}

/// The redactor, and the address and length of the string not to search again.
#[derive(Clone, Copy)]
struct Probe<'a>(&'a Redactor, Option<(usize, usize)>);

impl Probe<'_> {
    fn check(self, s: &str) -> Result<(), Stop> {
        if self.1 == Some((s.as_ptr() as usize, s.len())) {
            debug_assert!(
                self.0.spans(s.as_bytes()).is_empty(),
                "a string vouched for as checked holds a secret"
            );
            return Ok(());
        }
        match self.0.spans(s.as_bytes()).is_empty() {
            true => Ok(()),
            false => Err(Stop::Secret),
        }
    }
}

/// Serializer methods of values that hold no string.
macro_rules! ignored {
    ($($method:ident($($ty:ty),*)),* $(,)?) => {$(
        fn $method(self, $(_: $ty),*) -> Result<(), Stop> {
            Ok(())
        }
    )*};
}

/// Serializer methods that start a sequence, a tuple, a map or a struct.
macro_rules! compound {
    ($($method:ident($($ty:ty),*)),* $(,)?) => {$(
        fn $method(self, $(_: $ty),*) -> Result<Self, Stop> {
            Ok(self)
        }
    )*};
}

impl<'a> ser::Serializer for Probe<'a> {
    type Ok = ();
    type Error = Stop;
    type SerializeSeq = Probe<'a>;
    type SerializeTuple = Probe<'a>;
    type SerializeTupleStruct = Probe<'a>;
    type SerializeTupleVariant = Probe<'a>;
    type SerializeMap = Probe<'a>;
    type SerializeStruct = Probe<'a>;
    type SerializeStructVariant = Probe<'a>;

    // Numbers, booleans, nothing, and bytes (an array of numbers in the tree).
    ignored!(
        serialize_none(),
        serialize_unit(),
        serialize_unit_struct(&'static str),
        serialize_bytes(&[u8]),
        serialize_bool(bool),
        serialize_i8(i8),
        serialize_i16(i16),
        serialize_i32(i32),
        serialize_i64(i64),
        serialize_u8(u8),
        serialize_u16(u16),
        serialize_u32(u32),
        serialize_u64(u64),
        serialize_f32(f32),
        serialize_f64(f64),
    );
    fn serialize_char(self, c: char) -> Result<(), Stop> {
        self.check(c.encode_utf8(&mut [0; 4]))
    }
    fn serialize_str(self, s: &str) -> Result<(), Stop> {
        self.check(s)
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Stop> {
        value.serialize(self)
    }
    // A string in the tree.
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<(), Stop> {
        self.check(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<(), Stop> {
        value.serialize(self)
    }
    // `{variant: value}`: the name is a key.
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        value: &T,
    ) -> Result<(), Stop> {
        value.serialize(self)
    }
    // Their parts are walked one by one (see `parts!`).
    compound!(
        serialize_seq(Option<usize>),
        serialize_tuple(usize),
        serialize_tuple_struct(&'static str, usize),
        serialize_tuple_variant(&'static str, u32, &'static str, usize),
        serialize_map(Option<usize>),
        serialize_struct(&'static str, usize),
        serialize_struct_variant(&'static str, u32, &'static str, usize),
    );
}

/// The parts of a sequence, a tuple or a struct: each value is walked in turn (a
/// struct's field names are keys).
macro_rules! parts {
    ($($part:ident :: $method:ident $(($key:ty))?),* $(,)?) => {$(
        impl ser::$part for Probe<'_> {
            type Ok = ();
            type Error = Stop;
            fn $method<T: Serialize + ?Sized>(
                &mut self,
                $(_: $key,)?
                value: &T,
            ) -> Result<(), Stop> {
                value.serialize(*self)
            }
            fn end(self) -> Result<(), Stop> {
                Ok(())
            }
        }
    )*};
}

parts!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
    SerializeTupleVariant::serialize_field,
    SerializeStruct::serialize_field(&'static str),
    SerializeStructVariant::serialize_field(&'static str),
);

impl ser::SerializeMap for Probe<'_> {
    type Ok = ();
    type Error = Stop;
    // A map's key is a string of the tree when it is a string (a number or a bool
    // made a key is not a secret).
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Stop> {
        key.serialize(*self)
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Stop> {
        value.serialize(*self)
    }
    fn end(self) -> Result<(), Stop> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    const SECRET: &str = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";

    #[derive(serde::Serialize)]
    #[serde(tag = "type", rename_all = "snake_case")]
    enum Tagged {
        Unit,
        Fields { text: String, n: u64 },
        Nested(Shape),
    }

    #[derive(serde::Serialize)]
    enum Shape {
        Word,
        LongVariantName,
        Newtype(String),
        Tuple(u8, String),
        Struct { inner: Option<String> },
    }

    #[derive(serde::Serialize)]
    struct All {
        c: char,
        bytes: serde_bytes_like::Bytes,
        tuple: (u8, String),
        map: BTreeMap<String, String>,
        shapes: Vec<Shape>,
        value: serde_json::Value,
        none: Option<String>,
        f: f64,
    }

    /// Bytes serialized as bytes (an array of numbers in the tree).
    mod serde_bytes_like {
        pub struct Bytes(pub Vec<u8>);
        impl serde::Serialize for Bytes {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_bytes(&self.0)
            }
        }
    }

    fn all(text: &str, key: &str) -> All {
        All {
            c: 'x',
            bytes: serde_bytes_like::Bytes(text.as_bytes().to_vec()),
            tuple: (1, "one".into()),
            map: BTreeMap::from([(key.to_string(), "v".to_string())]),
            shapes: vec![
                Shape::Word,
                Shape::Newtype("n".into()),
                Shape::Tuple(2, "t".into()),
                Shape::Struct { inner: None },
            ],
            value: {
                let mut v = serde_json::json!({"a": [1, "b", {"c": null}]});
                v[key] = serde_json::json!(2);
                v
            },
            none: None,
            f: f64::NAN,
        }
    }

    /// The probe answers as the tree's check, on every shape serde hands over, with the
    /// secret in a string value, in a map's key, in bytes, and in a variant's name (a
    /// secret value the redactor was given).
    #[test]
    fn the_probe_answers_as_the_tree_s_check() {
        let patterns = Redactor::default();
        let mut named = Redactor::default();
        named.add_value("VARIANT_NAME", "LongVariantName");
        named.add_value("A_TOKEN", "Tokenish");
        let check = |r: &Redactor, v: &dyn erased::Ser, want: bool| {
            let tree = v.tree();
            assert_eq!(r.json_holds_secret(&tree), want, "{tree}");
            assert_eq!(v.probe(r), want, "{tree}");
        };
        let with = |text: &str| Tagged::Fields {
            text: text.into(),
            n: 3,
        };
        check(&patterns, &Tagged::Unit, false);
        check(&patterns, &with("plain"), false);
        check(&patterns, &with(&format!("x {SECRET} y")), true);
        check(
            &patterns,
            &Tagged::Nested(Shape::Newtype(SECRET.into())),
            true,
        );
        check(
            &patterns,
            &Tagged::Nested(Shape::Tuple(1, SECRET.into())),
            true,
        );
        let inner = Some(SECRET.to_string());
        check(&patterns, &Tagged::Nested(Shape::Struct { inner }), true);
        check(&patterns, &all("plain", "k"), false);
        // Bytes are not strings of the tree; a map's keys are.
        check(&patterns, &all(SECRET, "k"), false);
        check(&patterns, &all("plain", SECRET), true);
        check(&patterns, &BTreeMap::from([(SECRET, 1)]), true);
        check(&patterns, &serde_json::json!({"a": {SECRET: null}}), true);
        let mut a = all("plain", "k");
        a.shapes.push(Shape::Newtype(SECRET.into()));
        check(&patterns, &a, true);
        let mut a = all("plain", "k");
        a.value = serde_json::json!([[{"deep": [SECRET]}]]);
        check(&patterns, &a, true);
        // A unit variant's name is a string of the tree; a newtype variant's is a key.
        check(&named, &vec![Shape::LongVariantName], true);
        check(&named, &vec![Shape::Word], false);
        check(&named, &Tagged::Nested(Shape::Word), false);
        check(&named, &'x', false);
        check(&named, &"Tokenish", true);
    }

    /// A value whose own `Serialize` fails holds no secret (its JSON fails too).
    #[test]
    fn a_value_that_does_not_serialize_holds_none() {
        struct Fails;
        impl serde::Serialize for Fails {
            fn serialize<S: serde::Serializer>(&self, _: S) -> Result<S::Ok, S::Error> {
                Err(ser::Error::custom("no"))
            }
        }
        assert!(!Redactor::default().holds_secret(&(Fails, SECRET)));
        assert!(Redactor::default().holds_secret(&(SECRET, Fails)));
    }

    /// Only the very string vouched for is passed over: a copy of it elsewhere in the
    /// value, a longer string starting at the same address, and every other string
    /// are searched as before.
    #[test]
    fn a_checked_string_is_passed_over_and_nothing_else() {
        let r = Redactor::default();
        let clean = "nothing to see here".to_string();
        let with_secret = format!("{clean} {SECRET}");
        // Clean, vouched: no secret; a secret beside it is still found.
        assert!(!r.holds_secret_but(&(&clean, 7), &clean));
        assert!(r.holds_secret_but(&(&clean, SECRET), &clean));
        assert!(r.holds_secret_but(&(SECRET, &clean), &clean));
        // A prefix of a string with a secret, at its address: the string is searched.
        assert!(r.holds_secret_but(&with_secret, &with_secret[..clean.len()]));
        // A string of another value, even equal: nothing is passed over.
        let copy = SECRET.to_string();
        assert!(r.holds_secret_but(&(SECRET, 1), &copy));
    }

    /// Vouching for a string that holds a secret is a bug the debug build catches.
    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "vouched for as checked holds a secret")]
    fn vouching_for_a_secret_is_caught_in_debug_builds() {
        let s = SECRET.to_string();
        Redactor::default().holds_secret_but(&s, &s);
    }

    /// Values of different types behind one test helper.
    mod erased {
        use super::*;

        pub trait Ser {
            fn tree(&self) -> serde_json::Value;
            fn probe(&self, r: &Redactor) -> bool;
        }

        impl<T: Serialize> Ser for T {
            fn tree(&self) -> serde_json::Value {
                serde_json::to_value(self).unwrap_or_else(|e| panic!("{e}"))
            }
            fn probe(&self, r: &Redactor) -> bool {
                r.holds_secret(self)
            }
        }
    }
}
