//! Reading `config.json` the way llama.cpp's converter does: a list of alternative key names
//! per hyper-parameter (`find_hparam`), with Hugging Face's defaults where `transformers`
//! would fill one in, and an ERR_INVALID_MODEL naming the field when a value is missing or
//! of the wrong kind.

use crate::error::{CoreError, Result};
use serde_json::{Map, Value as Json};

/// `config.json`, with a multimodal model's `text_config` lifted to the top level (as the
/// converter does: the text model is what llama.cpp runs).
pub struct Hparams {
    map: Map<String, Json>,
    raw: Json,
}

impl Hparams {
    pub fn new(config: &Json) -> Result<Hparams> {
        let mut map = config
            .as_object()
            .cloned()
            .ok_or_else(|| CoreError::invalid_model("config.json must hold a JSON object"))?;
        if let Some(Json::Object(text)) = map.get("text_config").cloned() {
            map.extend(text);
        }
        Ok(Hparams {
            map,
            raw: config.clone(),
        })
    }

    /// With `defaults` (a JSON object) for the text model's fields config.json leaves out, as
    /// transformers' config class fills them in and the converter, which loads config.json
    /// through `AutoConfig`, sees them: into `text_config` where there is one (whose values
    /// then win over the top level's, as they do in the converter's merge), else at the top
    /// level. A field present as null stays null. [`Hparams::raw`] stays config.json as written.
    pub fn with_text_defaults(&self, defaults: &Json) -> Result<Hparams> {
        let mut config = self.raw.clone();
        let target = match config.get_mut("text_config") {
            Some(Json::Object(text)) => Some(text),
            _ => config.as_object_mut(),
        };
        if let (Some(target), Some(defaults)) = (target, defaults.as_object()) {
            for (k, v) in defaults {
                target.entry(k.as_str()).or_insert_with(|| v.clone());
            }
        }
        let mut h = Hparams::new(&config)?;
        h.raw = self.raw.clone();
        Ok(h)
    }

    /// config.json as written (without the `text_config` lifting).
    pub fn raw(&self) -> &Json {
        &self.raw
    }

    /// The first of `keys` present (and not null), with the key that held it.
    pub fn find(&self, keys: &[&str]) -> Option<(&str, &Json)> {
        keys.iter().find_map(|k| match self.map.get(*k) {
            None | Some(Json::Null) => None,
            Some(v) => Some((self.map.get_key_value(*k).map(|(k, _)| k.as_str())?, v)),
        })
    }

    pub fn get(&self, key: &str) -> Option<&Json> {
        self.find(&[key]).map(|(_, v)| v)
    }

    /// A positive integer under one of `keys`; `None` when none is present.
    pub fn count(&self, keys: &[&str]) -> Result<Option<usize>> {
        match self.find(keys) {
            None => Ok(None),
            Some((k, v)) => match v.as_u64() {
                Some(n) if n > 0 && n <= u32::MAX as u64 => Ok(Some(n as usize)),
                _ => Err(field_error(
                    k,
                    &format!("must be a positive integer below 2^32, not {v}"),
                )),
            },
        }
    }

    /// A required positive integer.
    pub fn required_count(&self, keys: &[&str]) -> Result<usize> {
        self.count(keys)?.ok_or_else(|| {
            field_error(keys[0], "is missing (llama.cpp needs it to load the model)")
        })
    }

    /// A finite number under one of `keys`.
    pub fn number(&self, keys: &[&str]) -> Result<Option<f64>> {
        match self.find(keys) {
            None => Ok(None),
            Some((k, v)) => match v.as_f64() {
                Some(x) if x.is_finite() => Ok(Some(x)),
                _ => Err(field_error(k, &format!("must be a finite number, not {v}"))),
            },
        }
    }

    pub fn bool(&self, key: &str) -> Result<Option<bool>> {
        match self.get(key) {
            None => Ok(None),
            Some(Json::Bool(b)) => Ok(Some(*b)),
            Some(v) => Err(field_error(key, &format!("must be true or false, not {v}"))),
        }
    }

    pub fn string(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(Json::as_str)
    }

    /// The rope parameters as the converter sees them: `rope_parameters` (transformers ≥ 5)
    /// or `rope_scaling`, with the top-level `rope_theta` and `partial_rotary_factor`
    /// mirrored in; `full_attention` chosen where a model has per-layer-type parameters.
    pub fn rope(&self) -> Result<Rope> {
        let mut params = match self.find(&["rope_parameters", "rope_scaling"]) {
            None => Map::new(),
            Some((_, Json::Object(m))) => m.clone(),
            Some((k, v)) => return Err(field_error(k, &format!("must be an object, not {v}"))),
        };
        if let Some(Json::Object(full)) = params.get("full_attention").cloned() {
            params = full;
        }
        let get_f64 = |m: &Map<String, Json>, k: &str, field: &str| -> Result<Option<f64>> {
            match m.get(k) {
                None | Some(Json::Null) => Ok(None),
                Some(v) => v
                    .as_f64()
                    .filter(|x| x.is_finite())
                    .map(Some)
                    .ok_or_else(|| {
                        field_error(field, &format!("'{k}' must be a finite number, not {v}"))
                    }),
            }
        };
        let theta = match get_f64(&params, "rope_theta", "rope_parameters")? {
            Some(t) => Some(t),
            None => self.number(&[
                "global_rope_theta",
                "rope_global_theta",
                "rope_theta_global",
                "rope_theta",
                "rotary_emb_base",
            ])?,
        };
        let kind = params
            .get("rope_type")
            .or_else(|| params.get("type"))
            .and_then(Json::as_str)
            .map(str::to_string);
        Ok(Rope {
            theta,
            kind,
            factor: get_f64(&params, "factor", "rope_scaling")?,
            original_context: match params.get("original_max_position_embeddings") {
                None | Some(Json::Null) => self.count(&["original_max_position_embeddings"])?,
                Some(v) => Some(v.as_u64().filter(|n| *n > 0).ok_or_else(|| {
                    field_error(
                        "rope_scaling",
                        "'original_max_position_embeddings' must be a positive integer",
                    )
                })? as usize),
            },
            low_freq_factor: get_f64(&params, "low_freq_factor", "rope_scaling")?,
            high_freq_factor: get_f64(&params, "high_freq_factor", "rope_scaling")?,
            yarn_ext_factor: get_f64(&params, "extrapolation_factor", "rope_scaling")?,
            yarn_attn_factor: match get_f64(&params, "attention_factor", "rope_scaling")? {
                Some(x) => Some(x),
                None => get_f64(&params, "attn_factor", "rope_scaling")?,
            },
            yarn_beta_fast: get_f64(&params, "beta_fast", "rope_scaling")?,
            yarn_beta_slow: get_f64(&params, "beta_slow", "rope_scaling")?,
        })
    }
}

/// Rope settings read from the config (see [`Hparams::rope`]).
#[derive(Debug, Clone, Default)]
pub struct Rope {
    pub theta: Option<f64>,
    pub kind: Option<String>,
    pub factor: Option<f64>,
    pub original_context: Option<usize>,
    pub low_freq_factor: Option<f64>,
    pub high_freq_factor: Option<f64>,
    pub yarn_ext_factor: Option<f64>,
    pub yarn_attn_factor: Option<f64>,
    pub yarn_beta_fast: Option<f64>,
    pub yarn_beta_slow: Option<f64>,
}

/// ERR_INVALID_MODEL naming a `config.json` field.
pub fn field_error(field: &str, problem: &str) -> CoreError {
    CoreError::invalid_model(format!("config.json: '{field}' {problem}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn first_present_alternative_wins_and_null_is_absent() {
        let h = Hparams::new(&json!({"n_ctx": 7, "max_position_embeddings": null})).unwrap();
        assert_eq!(
            h.count(&["max_position_embeddings", "n_ctx"]).unwrap(),
            Some(7)
        );
        assert_eq!(h.count(&["hidden_size"]).unwrap(), None);
    }

    #[test]
    fn wrong_kinds_name_the_field() {
        let h =
            Hparams::new(&json!({"hidden_size": "64", "rms_norm_eps": "x", "layers": 0})).unwrap();
        let e = h.count(&["hidden_size"]).unwrap_err();
        assert_eq!(e.code(), "ERR_INVALID_MODEL");
        assert!(e.to_string().contains("'hidden_size'"), "{e}");
        assert!(h.number(&["rms_norm_eps"]).is_err());
        assert!(h.count(&["layers"]).is_err());
        let e = h.required_count(&["num_hidden_layers"]).unwrap_err();
        assert!(
            e.to_string().contains("'num_hidden_layers' is missing"),
            "{e}"
        );
    }

    #[test]
    fn text_config_is_lifted() {
        let h =
            Hparams::new(&json!({"text_config": {"hidden_size": 8}, "hidden_size": 4})).unwrap();
        assert_eq!(h.count(&["hidden_size"]).unwrap(), Some(8));
    }

    #[test]
    fn text_defaults_fill_the_text_config_only_where_a_field_is_absent() {
        let defaults = json!({"num_attention_heads": 8, "head_dim": 256, "sliding_window": 4096});
        let nested = json!({"num_attention_heads": 2, "sliding_window": 7,
            "text_config": {"head_dim": null, "hidden_size": 64}});
        let h = Hparams::new(&nested)
            .unwrap()
            .with_text_defaults(&defaults)
            .unwrap();
        // The text config's default wins over the top level, as in the converter's merge.
        assert_eq!(h.count(&["num_attention_heads"]).unwrap(), Some(8));
        assert_eq!(h.count(&["sliding_window"]).unwrap(), Some(4096));
        assert_eq!(h.count(&["head_dim"]).unwrap(), None);
        assert_eq!(h.count(&["hidden_size"]).unwrap(), Some(64));
        assert_eq!(h.raw(), &nested);
        let flat = Hparams::new(&json!({"num_attention_heads": 2}))
            .unwrap()
            .with_text_defaults(&defaults)
            .unwrap();
        assert_eq!(flat.count(&["num_attention_heads"]).unwrap(), Some(2));
        assert_eq!(flat.count(&["head_dim"]).unwrap(), Some(256));
    }

    #[test]
    fn rope_from_either_layout() {
        let old = Hparams::new(&json!({"rope_theta": 500000.0,
            "rope_scaling": {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                             "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}}))
        .unwrap()
        .rope()
        .unwrap();
        assert_eq!(old.theta, Some(500000.0));
        assert_eq!(old.kind.as_deref(), Some("llama3"));
        assert_eq!(old.original_context, Some(8192));
        let new =
            Hparams::new(&json!({"rope_parameters": {"rope_theta": 1e6, "rope_type": "default"}}))
                .unwrap()
                .rope()
                .unwrap();
        assert_eq!(new.theta, Some(1e6));
        assert_eq!(new.factor, None);
    }
}
