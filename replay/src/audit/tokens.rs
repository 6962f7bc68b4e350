//! The tokens each model used (from `model_turn.usage`), and what they cost when the
//! caller knows prices.

use std::collections::BTreeMap;

use cairn_core::Record;
use cairn_core::event::Event;
use serde::Serialize;

use super::{Audit, Fold};

/// The tokens one model used over the session.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TokenUse {
    pub provider: String,
    pub model: String,
    /// Model turns.
    pub turns: u64,
    /// Turns that recorded no usage.
    pub turns_without_usage: u64,
    pub input: u64,
    pub output: u64,
    /// Input tokens read from the provider's cache (part of `input`), when it says.
    pub cached: u64,
}

/// What a session's tokens cost, in dollars.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Cost {
    /// Each model that has a price, with what its tokens cost.
    pub models: BTreeMap<String, f64>,
    /// Models used without a price: their cost is left out of `total`.
    pub unpriced: Vec<String>,
    pub total: f64,
}

/// A model's prices, in dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Price {
    pub input_per_mtok: f64,
    pub output_per_mtok: f64,
    /// Input tokens read from the provider's cache.
    pub cached_per_mtok: f64,
}

impl Price {
    /// What `t`'s tokens cost, in dollars: cached input at the cached price, the rest
    /// of the input at the input price, the output at the output price.
    pub fn cost(&self, t: &TokenUse) -> f64 {
        let cached = t.cached.min(t.input);
        ((t.input - cached) as f64 * self.input_per_mtok
            + cached as f64 * self.cached_per_mtok
            + t.output as f64 * self.output_per_mtok)
            / 1e6
    }
}

impl Audit {
    /// Sets [`Audit::cost`] from `prices` (by model name).
    pub fn price(&mut self, prices: &BTreeMap<String, Price>) {
        let mut cost = Cost::default();
        for t in &self.tokens {
            match prices.get(&t.model) {
                Some(p) => {
                    let c = p.cost(t);
                    *cost.models.entry(t.model.clone()).or_default() += c;
                    cost.total += c;
                }
                None if !cost.unpriced.contains(&t.model) => cost.unpriced.push(t.model.clone()),
                None => {}
            }
        }
        self.cost = Some(cost);
    }
}

/// The tokens per provider and model, in the order first used, from every `model_turn`.
#[derive(Debug, Default)]
pub(super) struct TokensFold {
    tokens: Vec<TokenUse>,
}

impl TokensFold {
    pub(super) fn finish(self) -> Vec<TokenUse> {
        self.tokens
    }
}

impl Fold for TokensFold {
    fn apply(&mut self, r: &Record) {
        let Event::ModelTurn {
            provider,
            model,
            usage,
            ..
        } = &r.event
        else {
            return;
        };
        let i = match self
            .tokens
            .iter()
            .position(|t| &t.provider == provider && &t.model == model)
        {
            Some(i) => i,
            None => {
                self.tokens.push(TokenUse {
                    provider: provider.clone(),
                    model: model.clone(),
                    ..TokenUse::default()
                });
                self.tokens.len() - 1
            }
        };
        let t = &mut self.tokens[i];
        t.turns += 1;
        match usage.as_ref().filter(|u| u.is_object()) {
            Some(u) => {
                let n = |k: &str| u.get(k).and_then(|v| v.as_u64()).unwrap_or(0);
                t.input += n("input_tokens");
                t.output += n("output_tokens");
                t.cached += n("cached_tokens");
            }
            None => t.turns_without_usage += 1,
        }
    }
}

/// Bytes a prices file may hold.
pub const PRICES_FILE_BYTES_MAX: u64 = 1024 * 1024;

/// Why prices could not be had from a file or a text.
#[derive(Debug, thiserror::Error)]
pub enum PricesError {
    /// The text is not prices: what is wrong, with the shape expected.
    #[error("{0}")]
    Invalid(String),
    /// The file could not be read, or is not prices.
    #[error("prices file {}: {what}", path.display())]
    File {
        path: std::path::PathBuf,
        what: String,
    },
}

/// Reads a prices file (see [`parse_prices`]), at most [`PRICES_FILE_BYTES_MAX`] bytes.
pub fn read_prices(path: &std::path::Path) -> Result<BTreeMap<String, Price>, PricesError> {
    use std::io::Read;
    let what = |what: String| PricesError::File {
        path: path.to_path_buf(),
        what,
    };
    let file = std::fs::File::open(path).map_err(|e| what(e.to_string()))?;
    let mut text = String::new();
    file.take(PRICES_FILE_BYTES_MAX + 1)
        .read_to_string(&mut text)
        .map_err(|e| what(e.to_string()))?;
    if text.len() as u64 > PRICES_FILE_BYTES_MAX {
        return Err(what(format!(
            "longer than prices_file_bytes_max ({PRICES_FILE_BYTES_MAX} bytes): give only the models you use"
        )));
    }
    parse_prices(&text).map_err(|e| what(e.to_string()))
}

/// Parses prices: a JSON object from model name to `{"input_per_mtok": N,
/// "output_per_mtok": N, "cached_per_mtok": N}` (dollars per million tokens, at least
/// 0; `cached_per_mtok` may be left out).
pub fn parse_prices(text: &str) -> Result<BTreeMap<String, Price>, PricesError> {
    const EXAMPLE: &str =
        r#"{"MODEL": {"input_per_mtok": 3.0, "output_per_mtok": 15.0, "cached_per_mtok": 0.3}}"#;
    let invalid = PricesError::Invalid;
    let v: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| invalid(format!("not JSON ({e}); expected {EXAMPLE}")))?;
    let map = v
        .as_object()
        .ok_or_else(|| invalid(format!("expected an object of models, as {EXAMPLE}")))?;
    let mut out = BTreeMap::new();
    for (model, p) in map {
        let field = |k: &str, required: bool| -> Result<Option<f64>, PricesError> {
            match p.get(k) {
                None if required => Err(invalid(format!(
                    "model \"{model}\": {k} is missing (dollars per million tokens)"
                ))),
                None => Ok(None),
                Some(x) => match x.as_f64() {
                    Some(n) if n >= 0.0 && n.is_finite() => Ok(Some(n)),
                    _ => Err(invalid(format!(
                        "model \"{model}\": {k} is {x}, not a number of dollars at least 0"
                    ))),
                },
            }
        };
        if !p.is_object() {
            return Err(invalid(format!(
                "model \"{model}\": expected an object, as {EXAMPLE}"
            )));
        }
        if let Some(k) = p.as_object().and_then(|o| {
            o.keys().find(|k| {
                !["input_per_mtok", "output_per_mtok", "cached_per_mtok"].contains(&k.as_str())
            })
        }) {
            return Err(invalid(format!(
                "model \"{model}\": unknown field {k} (input_per_mtok, output_per_mtok, cached_per_mtok)"
            )));
        }
        let input = field("input_per_mtok", true)?.unwrap_or(0.0);
        out.insert(
            model.clone(),
            Price {
                input_per_mtok: input,
                output_per_mtok: field("output_per_mtok", true)?.unwrap_or(0.0),
                cached_per_mtok: field("cached_per_mtok", false)?.unwrap_or(input),
            },
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::super::testing::{rec, run};
    use super::*;

    fn turn(seq: u64, provider: &str, model: &str, usage: Value) -> Record {
        rec(
            seq,
            seq,
            json!({"type": "model_turn", "provider": provider, "model": model, "text": "",
                "usage": usage}),
        )
    }

    fn uses(provider: &str, model: &str, n: [u64; 5]) -> TokenUse {
        let [turns, turns_without_usage, input, output, cached] = n;
        TokenUse {
            provider: provider.into(),
            model: model.into(),
            turns,
            turns_without_usage,
            input,
            output,
            cached,
        }
    }

    #[test]
    fn tokens_add_up_per_provider_and_model_in_the_order_first_used() {
        let records = [
            turn(
                1,
                "openai",
                "m-1",
                json!({"input_tokens": 100, "output_tokens": 10, "cached_tokens": 40}),
            ),
            turn(
                2,
                "anthropic",
                "m-2",
                json!({"input_tokens": 7, "output_tokens": 3}),
            ),
            turn(
                3,
                "openai",
                "m-1",
                json!({"input_tokens": 50, "output_tokens": 5}),
            ),
            // No usage, or a usage that is not an object: counted as without.
            turn(4, "openai", "m-1", Value::Null),
            turn(5, "anthropic", "m-2", json!([1, 2])),
            // The same model from another provider is another line.
            turn(6, "other", "m-1", json!({"input_tokens": 1})),
        ];
        let tokens = run(TokensFold::default(), &records).finish();
        assert_eq!(
            tokens,
            [
                uses("openai", "m-1", [3, 1, 150, 15, 40]),
                uses("anthropic", "m-2", [2, 1, 7, 3, 0]),
                uses("other", "m-1", [1, 0, 1, 0, 0]),
            ]
        );
    }

    #[test]
    fn a_price_charges_cached_input_at_its_own_rate() {
        let p = Price {
            input_per_mtok: 2.0,
            output_per_mtok: 10.0,
            cached_per_mtok: 0.5,
        };
        // 600 000 fresh at 2, 400 000 cached at 0.5, 100 000 out at 10.
        let t = uses("p", "m", [1, 0, 1_000_000, 100_000, 400_000]);
        assert!(
            (p.cost(&t) - (1.2 + 0.2 + 1.0)).abs() < 1e-9,
            "{}",
            p.cost(&t)
        );
        // More cached than input (a provider's odd count) charges no negative input.
        let odd = uses("p", "m", [1, 0, 10, 0, 20]);
        assert!((p.cost(&odd) - 10.0 * 0.5 / 1e6).abs() < 1e-15);
    }

    #[test]
    fn prices_parse_and_bad_ones_say_what_is_wrong() {
        let p = parse_prices(r#"{"m-1": {"input_per_mtok": 2, "output_per_mtok": 10}}"#).unwrap();
        let t = TokenUse {
            input: 1_000_000,
            output: 500_000,
            cached: 250_000,
            ..Default::default()
        };
        assert_eq!(p["m-1"].cost(&t), 2.0 + 5.0);
        let with_cache = parse_prices(
            r#"{"m-1": {"input_per_mtok": 2, "output_per_mtok": 10, "cached_per_mtok": 0.5}}"#,
        )
        .unwrap();
        assert_eq!(with_cache["m-1"].cost(&t), 1.5 + 0.125 + 5.0);
        let errors: Vec<String> = [
            "[1]",
            r#"{"m": {"output_per_mtok": 1}}"#,
            r#"{"m": {"input_per_mtok": -1, "output_per_mtok": 1}}"#,
            r#"{"m": {"input_per_mtok": 1, "output_per_mtok": 1, "cache": 1}}"#,
        ]
        .iter()
        .map(|t| parse_prices(t).unwrap_err().to_string())
        .collect();
        assert!(
            errors[0].starts_with("expected an object of models"),
            "{errors:?}"
        );
        assert_eq!(
            errors[1..],
            [
                "model \"m\": input_per_mtok is missing (dollars per million tokens)",
                "model \"m\": input_per_mtok is -1, not a number of dollars at least 0",
                "model \"m\": unknown field cache (input_per_mtok, output_per_mtok, cached_per_mtok)",
            ]
        );
    }

    #[test]
    fn a_prices_file_is_read_up_to_its_limit() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("prices.json");
        let body = r#"{"m": {"input_per_mtok": 1, "output_per_mtok": 1}}"#;
        let pad = PRICES_FILE_BYTES_MAX as usize - body.len();
        std::fs::write(&file, format!("{}{body}", " ".repeat(pad))).unwrap();
        assert_eq!(read_prices(&file).unwrap().len(), 1);
        std::fs::write(&file, format!("{}{body}", " ".repeat(pad + 1))).unwrap();
        let e = read_prices(&file).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!("prices file {}: ", file.display())),
            "{e}"
        );
        assert!(e.ends_with(
            "longer than prices_file_bytes_max (1048576 bytes): give only the models you use"
        ));
    }
}
