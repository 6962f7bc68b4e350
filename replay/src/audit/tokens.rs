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
}
