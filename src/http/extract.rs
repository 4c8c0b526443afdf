//! Request extractors whose rejections are problem documents that name the offending field.

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::{header, HeaderMap, StatusCode};
use serde::de::{self, DeserializeOwned};

use super::error::ApiError;
use super::AppState;
use crate::domain::FieldError;

/// A JSON body. Malformed JSON is a 400; JSON of the wrong shape is a 422 naming the field
/// (`events[3].role`); a body over the limit is a 413; another content type is a 415.
pub struct Json<T>(pub T);

impl<T: DeserializeOwned> FromRequest<AppState> for Json<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &AppState) -> Result<Self, Self::Rejection> {
        if !is_json(request.headers()) {
            return Err(ApiError::UnsupportedMediaType(
                "expected a body with content type application/json".into(),
            ));
        }
        let bytes = Bytes::from_request(request, state)
            .await
            .map_err(|rejection| {
                if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                    ApiError::PayloadTooLarge(format!(
                        "the request body exceeds the limit of {} bytes",
                        state.limits.max_body_bytes
                    ))
                } else {
                    ApiError::BadRequest(rejection.body_text())
                }
            })?;
        parse(&bytes).map(Json)
    }
}

fn is_json(headers: &HeaderMap) -> bool {
    let Some(value) = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let essence = value.split(';').next().unwrap_or("").trim();
    essence.eq_ignore_ascii_case("application/json")
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

/// A `limit` query parameter: `default` when absent, else it must be 1 to `max`.
pub fn page_limit<T>(given: Option<T>, default: T, max: T) -> Result<T, ApiError>
where
    T: Copy + PartialOrd + From<u8> + std::fmt::Display,
{
    let limit = given.unwrap_or(default);
    if limit < T::from(1) || limit > max {
        return Err(ApiError::BadRequest(format!(
            "limit must be between 1 and {max}"
        )));
    }
    Ok(limit)
}

/// Parses a JSON body, turning serde's errors into problems that name the field.
pub fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let value =
        serde_path_to_error::deserialize(ObjectsOnly(&mut deserializer)).map_err(|error| {
            let path = error.path().clone();
            let inner = error.into_inner();
            if inner.is_data() {
                ApiError::validation(vec![field_error(&path, &inner)])
            } else {
                ApiError::BadRequest(format!("the body is not valid JSON: {inner}"))
            }
        })?;
    deserializer
        .end()
        .map_err(|e| ApiError::BadRequest(format!("the body is not valid JSON: {e}")))?;
    Ok(value)
}

/// Names the field a serde error is about: an event's index and its field when the error is
/// inside the `events` array, else the dotted path.
fn field_error(path: &serde_path_to_error::Path, error: &serde_json::Error) -> FieldError {
    use serde_path_to_error::Segment;
    let mut message = error.to_string();
    if let Some(at) = message.find(" at line ") {
        message.truncate(at);
    }
    let segments: Vec<&Segment> = path.iter().collect();
    let (index, rest) = match segments.as_slice() {
        [Segment::Map { key }, Segment::Seq { index }, rest @ ..] if key == "events" => {
            (Some(*index), rest)
        }
        all => (None, all),
    };
    let mut field = String::new();
    for segment in rest {
        match segment {
            Segment::Seq { index } => field.push_str(&format!("[{index}]")),
            Segment::Map { key } => {
                if !field.is_empty() {
                    field.push('.');
                }
                field.push_str(key);
            }
            Segment::Enum { .. } | Segment::Unknown => {}
        }
    }
    // serde reports a missing field at the struct that lacks it: name the field itself.
    if let Some(missing) = message
        .strip_prefix("missing field `")
        .and_then(|m| m.strip_suffix('`'))
    {
        if !field.is_empty() {
            field.push('.');
        }
        field.push_str(missing);
    }
    if field.is_empty() {
        field.push_str(if index.is_some() { "(event)" } else { "(body)" });
    }
    FieldError {
        index,
        field,
        message,
    }
}

/// A deserializer that refuses a JSON array where a struct is expected, at any depth: serde's
/// derived structs also accept their fields as a sequence (`[]` would be a body of defaults).
struct ObjectsOnly<D>(D);

/// Wraps a visitor so that what it visits is read through [`ObjectsOnly`]; `object` when the
/// visitor builds a struct, which refuses a sequence.
struct Visit<V> {
    inner: V,
    object: bool,
    /// The visitor builds an integer: a float without a fraction is visited as that integer.
    integer: bool,
}

impl<V> Visit<V> {
    fn any(inner: V) -> Self {
        Self {
            inner,
            object: false,
            integer: false,
        }
    }
}

/// The largest magnitude below which every whole `f64` converts exactly: 2^64.
const TWO_POW_64: f64 = 18_446_744_073_709_551_616.0;

/// A seed, a sequence, a map or an enum whose values are read through [`ObjectsOnly`].
struct Nested<T>(T);

/// Integers are read with a visitor that takes a number written with a zero fraction (`2.0`)
/// as the integer it is: JSON Schema's `integer` type, which the OpenAPI document uses, counts
/// it as one.
macro_rules! forward_deserialize_integer {
    ($($method:ident),* $(,)?) => {$(
        fn $method<V: de::Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
            self.0.$method(Visit { inner: visitor, object: false, integer: true })
        }
    )*};
}

macro_rules! forward_deserialize {
    ($($method:ident($($arg:ident: $ty:ty),*)),* $(,)?) => {$(
        fn $method<V: de::Visitor<'de>>(self, $($arg: $ty,)* visitor: V) -> Result<V::Value, D::Error> {
            self.0.$method($($arg,)* Visit::any(visitor))
        }
    )*};
}

impl<'de, D: de::Deserializer<'de>> de::Deserializer<'de> for ObjectsOnly<D> {
    type Error = D::Error;

    forward_deserialize!(
        deserialize_any(), deserialize_bool(),
        deserialize_f32(), deserialize_f64(), deserialize_char(), deserialize_str(),
        deserialize_string(), deserialize_bytes(), deserialize_byte_buf(), deserialize_option(),
        deserialize_unit(), deserialize_unit_struct(name: &'static str),
        deserialize_newtype_struct(name: &'static str), deserialize_seq(),
        deserialize_tuple(len: usize),
        deserialize_tuple_struct(name: &'static str, len: usize), deserialize_map(),
        deserialize_enum(name: &'static str, variants: &'static [&'static str]),
        deserialize_identifier(), deserialize_ignored_any(),
    );

    forward_deserialize_integer!(
        deserialize_i8,
        deserialize_i16,
        deserialize_i32,
        deserialize_i64,
        deserialize_i128,
        deserialize_u8,
        deserialize_u16,
        deserialize_u32,
        deserialize_u64,
        deserialize_u128,
    );

    fn deserialize_struct<V: de::Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        let visit = Visit {
            inner: visitor,
            object: true,
            integer: false,
        };
        self.0.deserialize_struct(name, fields, visit)
    }

    fn is_human_readable(&self) -> bool {
        self.0.is_human_readable()
    }
}

macro_rules! forward_visit {
    ($($method:ident($ty:ty)),* $(,)?) => {$(
        fn $method<E: de::Error>(self, value: $ty) -> Result<V::Value, E> {
            self.inner.$method(value)
        }
    )*};
}

impl<'de, V: de::Visitor<'de>> de::Visitor<'de> for Visit<V> {
    type Value = V::Value;

    fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
        self.inner.expecting(formatter)
    }

    forward_visit!(
        visit_bool(bool),
        visit_i8(i8),
        visit_i16(i16),
        visit_i32(i32),
        visit_i64(i64),
        visit_i128(i128),
        visit_u8(u8),
        visit_u16(u16),
        visit_u32(u32),
        visit_u64(u64),
        visit_u128(u128),
        visit_f32(f32),
        visit_char(char),
        visit_str(&str),
        visit_borrowed_str(&'de str),
        visit_string(String),
        visit_bytes(&[u8]),
        visit_borrowed_bytes(&'de [u8]),
        visit_byte_buf(Vec<u8>),
    );

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<V::Value, E> {
        if self.integer && value.fract() == 0.0 {
            if (0.0..TWO_POW_64).contains(&value) {
                return self.inner.visit_u64(value as u64);
            }
            if (-TWO_POW_64 / 2.0..0.0).contains(&value) {
                return self.inner.visit_i64(value as i64);
            }
        }
        self.inner.visit_f64(value)
    }

    fn visit_none<E: de::Error>(self) -> Result<V::Value, E> {
        self.inner.visit_none()
    }

    fn visit_unit<E: de::Error>(self) -> Result<V::Value, E> {
        self.inner.visit_unit()
    }

    fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<V::Value, D::Error> {
        self.inner.visit_some(ObjectsOnly(d))
    }

    fn visit_newtype_struct<D: de::Deserializer<'de>>(self, d: D) -> Result<V::Value, D::Error> {
        self.inner.visit_newtype_struct(ObjectsOnly(d))
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, seq: A) -> Result<V::Value, A::Error> {
        if self.object {
            return Err(de::Error::custom("expected a JSON object, found an array"));
        }
        self.inner.visit_seq(Nested(seq))
    }

    fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        self.inner.visit_map(Nested(map))
    }

    fn visit_enum<A: de::EnumAccess<'de>>(self, data: A) -> Result<V::Value, A::Error> {
        self.inner.visit_enum(Nested(data))
    }
}

impl<'de, S: de::DeserializeSeed<'de>> de::DeserializeSeed<'de> for Nested<S> {
    type Value = S::Value;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<S::Value, D::Error> {
        self.0.deserialize(ObjectsOnly(d))
    }
}

impl<'de, A: de::SeqAccess<'de>> de::SeqAccess<'de> for Nested<A> {
    type Error = A::Error;

    fn next_element_seed<T: de::DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, A::Error> {
        self.0.next_element_seed(Nested(seed))
    }

    fn size_hint(&self) -> Option<usize> {
        self.0.size_hint()
    }
}

impl<'de, A: de::MapAccess<'de>> de::MapAccess<'de> for Nested<A> {
    type Error = A::Error;

    fn next_key_seed<K: de::DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        self.0.next_key_seed(Nested(seed))
    }

    fn next_value_seed<T: de::DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<T::Value, A::Error> {
        self.0.next_value_seed(Nested(seed))
    }

    fn size_hint(&self) -> Option<usize> {
        self.0.size_hint()
    }
}

impl<'de, A: de::EnumAccess<'de>> de::EnumAccess<'de> for Nested<A> {
    type Error = A::Error;
    type Variant = Nested<A::Variant>;

    fn variant_seed<T: de::DeserializeSeed<'de>>(
        self,
        seed: T,
    ) -> Result<(T::Value, Self::Variant), A::Error> {
        let (value, variant) = self.0.variant_seed(Nested(seed))?;
        Ok((value, Nested(variant)))
    }
}

impl<'de, A: de::VariantAccess<'de>> de::VariantAccess<'de> for Nested<A> {
    type Error = A::Error;

    fn unit_variant(self) -> Result<(), A::Error> {
        self.0.unit_variant()
    }

    fn newtype_variant_seed<T: de::DeserializeSeed<'de>>(
        self,
        seed: T,
    ) -> Result<T::Value, A::Error> {
        self.0.newtype_variant_seed(Nested(seed))
    }

    fn tuple_variant<V: de::Visitor<'de>>(
        self,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, A::Error> {
        self.0.tuple_variant(len, Visit::any(visitor))
    }

    fn struct_variant<V: de::Visitor<'de>>(
        self,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, A::Error> {
        let visit = Visit {
            inner: visitor,
            object: true,
            integer: false,
        };
        self.0.struct_variant(fields, visit)
    }
}

/// 413 when `value` (an event's body, a turn's message) is larger than `max` bytes of JSON,
/// naming it as `what`.
pub fn event_within(what: &str, value: &impl serde::Serialize, max: usize) -> Result<(), ApiError> {
    let mut counter = ByteCounter(0);
    // Counting what serialising writes, without keeping it.
    let _ = serde_json::to_writer(&mut counter, value);
    if counter.0 > max {
        return Err(ApiError::PayloadTooLarge(format!(
            "{what} is {} bytes; the limit is {max} bytes per event",
            counter.0
        )));
    }
    Ok(())
}

struct ByteCounter(usize);

impl std::io::Write for ByteCounter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::event::EventInput;

    #[derive(serde::Deserialize, Debug)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Batch {
        events: Vec<EventInput>,
    }

    fn errors(body: &str) -> Vec<FieldError> {
        match parse::<Batch>(body.as_bytes()) {
            Err(ApiError::Validation { errors, .. }) => errors,
            other => panic!("expected a validation error, got {other:?}"),
        }
    }

    #[test]
    fn errors_inside_the_batch_name_the_event_and_field() {
        let e =
            errors(r#"{"events":[{"type":"note","content":"x"},{"type":"message","role":"bot"}]}"#);
        assert_eq!(e[0].index, Some(1));
        assert_eq!(e[0].field, "role");
        assert!(
            e[0].message.contains("unknown variant `bot`"),
            "{}",
            e[0].message
        );

        let e = errors(r#"{"events":[{"type":"mesage","role":"user"}]}"#);
        assert_eq!((e[0].index, e[0].field.as_str()), (Some(0), "type"));

        let e = errors(r#"{"events":[{"role":"user"}]}"#);
        assert_eq!((e[0].index, e[0].field.as_str()), (Some(0), "type"));

        let e = errors(r#"{"events":[{"type":"message","tool_calls":[{"id":1}]}]}"#);
        assert_eq!(
            (e[0].index, e[0].field.as_str()),
            (Some(0), "tool_calls[0].id")
        );
    }

    #[test]
    fn an_array_is_never_an_object() {
        let e = errors("[]");
        assert_eq!((e[0].index, e[0].field.as_str()), (None, "(body)"));
        assert!(e[0].message.contains("expected a JSON object"), "{e:?}");

        let e = errors(r#"{"events":[{"type":"note","content":"x"},["x","note"]]}"#);
        assert_eq!((e[0].index, e[0].field.as_str()), (Some(1), "(event)"));
        let e = errors(r#"{"events":[{"type":"message","tool_calls":[["c","ls"]]}]}"#);
        assert_eq!(
            (e[0].index, e[0].field.as_str()),
            (Some(0), "tool_calls[0]")
        );
        // Arrays stay welcome where the schema has them, objects where it has objects.
        let ok = parse::<Batch>(
            br#"{"events":[{"type":"episode_start","name":"e","kind":"action","dependencies":["a"],"metadata":{"x":[1,{"y":[]}]}}]}"#,
        );
        assert!(ok.is_ok(), "{ok:?}");
    }

    #[test]
    fn a_whole_number_with_a_fraction_is_an_integer() {
        #[derive(serde::Deserialize, Debug, PartialEq)]
        struct Numbers {
            small: u8,
            signed: Option<i64>,
            real: f64,
        }
        let n: Numbers =
            parse(br#"{"small": 2.0, "signed": -3.0, "real": 1.0}"#).expect("whole numbers");
        assert_eq!(
            n,
            Numbers {
                small: 2,
                signed: Some(-3),
                real: 1.0
            }
        );
        // A fraction, or a whole number out of the type's range, is still refused.
        assert!(parse::<Numbers>(br#"{"small": 2.5, "signed": 0, "real": 0}"#).is_err());
        assert!(parse::<Numbers>(br#"{"small": 256.0, "signed": 0, "real": 0}"#).is_err());
        assert!(parse::<Numbers>(br#"{"small": 1, "signed": 1e300, "real": 0}"#).is_err());
    }

    #[test]
    fn malformed_json_is_a_bad_request() {
        assert!(matches!(
            parse::<Batch>(b"{\"events\": ["),
            Err(ApiError::BadRequest(_))
        ));
        assert!(matches!(
            parse::<Batch>(b"{\"events\": []} x"),
            Err(ApiError::BadRequest(_))
        ));
    }
}
