//! Special tokens, `add_*_token` flags, merges, chat template and normalizer flags, read
//! the way gguf-py's `SpecialVocab` reads them: `tokenizer.json` (its added tokens, its
//! post-processor's template, its normalizer), then `tokenizer_config.json` (token names
//! resolved to ids through `tokenizer.json`'s added tokens, the `add_*_token` flags, the chat
//! template or `chat_template.jinja` / `chat_template.json`), then `config.json`'s
//! `*_token_id` for types still unset. The branches follow gguf-py's, quirks included, so a
//! file we write carries the same special tokens as one llama.cpp's converter writes.

use super::super::Metadata;
use super::tokenizer_json::{AddedToken, TokenizerJson};
use super::{read_json, read_text, Need};
use crate::error::{CoreError, Result};
use crate::format::gguf::{GgufArray, GgufValue};
use crate::pretrained::companion::ModelFiles;
use serde_json::{Map, Value as Json};

/// What [`SpecialVocab::load`] found, in the order gguf-py would write it.
#[derive(Debug, Default)]
pub struct SpecialVocab {
    pub merges: Vec<String>,
    /// (type, id), first setting wins, insertion order.
    pub ids: Vec<(String, u32)>,
    /// (type, add), insertion order.
    pub add: Vec<(String, bool)>,
    pub chat_template: Option<ChatTemplate>,
    pub lowercase: Option<bool>,
    pub strip_accents: Option<bool>,
    types: Vec<String>,
    n_vocab: Option<usize>,
    pub warnings: Vec<String>,
}

/// A chat template: one string, or named templates (`[{name, template}]`).
#[derive(Debug, Clone, PartialEq)]
pub enum ChatTemplate {
    One(String),
    Named(Vec<(String, String)>),
}

/// Python's truthiness of a JSON value (None, "", {}, [], false, 0 are false).
fn truthy(v: Option<&Json>) -> bool {
    match v {
        None | Some(Json::Null) => false,
        Some(Json::Bool(b)) => *b,
        Some(Json::String(s)) => !s.is_empty(),
        Some(Json::Array(a)) => !a.is_empty(),
        Some(Json::Object(o)) => !o.is_empty(),
        Some(Json::Number(n)) => n.as_f64() != Some(0.0),
    }
}

/// `obj.get(key, {}).get('id')` on a template entry (`{"SpecialToken": {"id": "[CLS]"}}`).
fn template_id<'a>(entry: Option<&'a Json>, kind: &str) -> Option<&'a str> {
    entry?.get(kind)?.get("id")?.as_str()
}

fn is(v: Option<&Json>, s: &str) -> bool {
    matches!(v, Some(Json::String(x)) if x == s)
}

impl SpecialVocab {
    /// Read the special vocabulary of the directory. `tokenizer_json` is the parsed
    /// `tokenizer.json` if the directory has one (its merges are taken out of it);
    /// `n_vocab` bounds the accepted ids.
    pub fn load(
        files: &ModelFiles,
        tokenizer_json: Option<&mut TokenizerJson>,
        config: &Json,
        load_merges: bool,
        n_vocab: Option<usize>,
    ) -> Result<SpecialVocab> {
        let mut sv = SpecialVocab {
            types: ["bos", "eos", "unk", "sep", "pad", "cls", "mask"]
                .map(String::from)
                .to_vec(),
            n_vocab,
            ..SpecialVocab::default()
        };
        sv.read_tokenizer_files(files, tokenizer_json, load_merges)?;
        sv.read_config(config)?;
        if load_merges && sv.merges.is_empty() {
            sv.merges_from_txt(files)?;
        }
        Ok(sv)
    }

    fn set_id(&mut self, typ: &str, id: Option<&Json>) -> Result<()> {
        // gguf-py takes Python ints only (a list, as Llama 3.1's eos_token_id, is skipped).
        let Some(Json::Number(n)) = id else {
            return Ok(());
        };
        let Some(id) = n.as_i64() else { return Ok(()) };
        if id < 0 {
            return Err(CoreError::invalid_model(format!(
                "special token '{typ}' has the negative id {id}"
            )));
        }
        if self.n_vocab.is_none_or(|n| (id as u64) < n as u64) {
            if !self.ids.iter().any(|(t, _)| t == typ) {
                let id = u32::try_from(id).map_err(|_| {
                    CoreError::invalid_model(format!("special token '{typ}' id {id} is too large"))
                })?;
                self.ids.push((typ.to_string(), id));
            }
        } else {
            self.warnings.push(format!(
                "special token '{typ}' id {id} is not below the vocabulary size {}: skipped",
                self.n_vocab.unwrap_or(0)
            ));
        }
        Ok(())
    }

    fn set_add(&mut self, typ: &str, value: bool, overwrite: bool) {
        match self.add.iter_mut().find(|(t, _)| t == typ) {
            Some(slot) if overwrite => slot.1 = value,
            Some(_) => {}
            None => self.add.push((typ.to_string(), value)),
        }
    }

    fn parse_normalizer(&mut self, n: &Json) {
        match n.get("type").and_then(Json::as_str) {
            Some("Lowercase") => self.lowercase = Some(true),
            Some("StripAccents") => self.strip_accents = Some(true),
            Some("BertNormalizer") => {
                if let Some(v) = n.get("lowercase") {
                    self.lowercase = v.as_bool();
                }
                if let Some(v) = n.get("strip_accents") {
                    self.strip_accents = v.as_bool();
                }
            }
            Some("Sequence") => {
                for inner in n
                    .get("normalizers")
                    .and_then(Json::as_array)
                    .into_iter()
                    .flatten()
                {
                    self.parse_normalizer(inner);
                }
            }
            _ => {}
        }
    }

    fn read_tokenizer_files(
        &mut self,
        files: &ModelFiles,
        mut tokenizer: Option<&mut TokenizerJson>,
        load_merges: bool,
    ) -> Result<()> {
        if let Some(tok) = tokenizer.as_deref_mut() {
            if load_merges {
                if let Some(merges) = tok.model.as_mut().and_then(|m| m.merges.take()) {
                    self.merges = merges.map_err(|()| {
                        CoreError::invalid_model(
                            "tokenizer.json: 'model.merges' is neither a list of strings nor a \
                             list of pairs",
                        )
                    })?;
                }
            }
            if let Some(n) = tok.normalizer.as_ref().filter(|n| truthy(Some(n))) {
                self.parse_normalizer(n);
            }
        }
        let tokenizer = tokenizer.map(|t| &*t);
        let added_tokens: &[AddedToken] = tokenizer.map_or(&[], |t| t.added());
        let mut tc: Option<Map<String, Json>> =
            match read_json(files, "tokenizer_config.json", Need::Extra)? {
                None => None,
                Some(Json::Object(m)) => Some(m),
                Some(_) => {
                    return Err(CoreError::invalid_model("must hold a JSON object")
                        .with_path(files.path("tokenizer_config.json")))
                }
            };
        let tc_truthy = |tc: &Option<Map<String, Json>>| tc.as_ref().is_some_and(|m| !m.is_empty());
        if let Some(tok) = tokenizer {
            let get = |tc: &Option<Map<String, Json>>, k: &str| {
                tc.as_ref().and_then(|m| m.get(k)).cloned()
            };
            let mut special_bos = get(&tc, "bos_token");
            let mut special_cls = get(&tc, "cls_token");
            let mut special_eos = get(&tc, "eos_token");
            let mut special_sep = get(&tc, "sep_token");
            if !truthy(special_bos.as_ref()) && truthy(special_cls.as_ref()) && tc_truthy(&tc) {
                special_bos = special_cls.clone();
                tc.as_mut().map(|m| {
                    m.insert(
                        "bos_token".into(),
                        special_bos.clone().unwrap_or(Json::Null),
                    )
                });
            }
            if !truthy(special_eos.as_ref()) && truthy(special_sep.as_ref()) && tc_truthy(&tc) {
                special_eos = special_sep.clone();
                tc.as_mut().map(|m| {
                    m.insert(
                        "eos_token".into(),
                        special_eos.clone().unwrap_or(Json::Null),
                    )
                });
            }
            if let Some(pp) = tok.post_processor.as_ref().filter(|p| truthy(Some(p))) {
                let processors: Vec<&Json> = match pp.get("processors").and_then(Json::as_array) {
                    Some(list) => list.iter().collect(),
                    None => vec![pp],
                };
                for processor in processors {
                    match processor.get("type").and_then(Json::as_str) {
                        Some("ByteLevel") => {
                            self.set_add("bos", false, false);
                            self.set_add("eos", false, false);
                        }
                        Some("RobertaProcessing") => {
                            self.set_add("bos", true, true);
                            self.set_add("eos", true, true);
                            self.set_add("sep", true, true);
                            if !truthy(special_cls.as_ref()) && tc_truthy(&tc) {
                                special_cls = processor
                                    .get("cls")
                                    .and_then(|c| c.get(0))
                                    .cloned()
                                    .or(special_bos.clone());
                                tc.as_mut().map(|m| {
                                    m.insert(
                                        "cls_token".into(),
                                        special_cls.clone().unwrap_or(Json::Null),
                                    )
                                });
                            }
                            if !truthy(special_sep.as_ref()) && tc_truthy(&tc) {
                                special_sep = processor
                                    .get("sep")
                                    .and_then(|c| c.get(0))
                                    .cloned()
                                    .or(special_eos.clone());
                                tc.as_mut().map(|m| {
                                    m.insert(
                                        "sep_token".into(),
                                        special_sep.clone().unwrap_or(Json::Null),
                                    )
                                });
                            }
                        }
                        Some("TemplateProcessing") => {
                            let single: &[Json] = processor
                                .get("single")
                                .and_then(Json::as_array)
                                .map_or(&[], Vec::as_slice);
                            let pair: &[Json] = processor
                                .get("pair")
                                .and_then(Json::as_array)
                                .map_or(&[], Vec::as_slice);
                            let mut special_first: Option<String> = None;
                            let mut special_last: Option<String> = None;
                            if single.len() > 1 {
                                special_first = template_id(single.first(), "SpecialToken")
                                    .filter(|s| !s.is_empty())
                                    .map(str::to_string);
                                if let Some(first) = &special_first {
                                    if !tc_truthy(&tc) {
                                        special_bos = Some(Json::String(first.clone()));
                                    } else if !is(special_bos.as_ref(), first)
                                        && !is(special_cls.as_ref(), first)
                                    {
                                        if !truthy(special_bos.as_ref()) {
                                            special_bos = Some(Json::String(first.clone()));
                                            tc.as_mut().map(|m| {
                                                m.insert(
                                                    "bos_token".into(),
                                                    Json::String(first.clone()),
                                                )
                                            });
                                        }
                                        if !truthy(special_cls.as_ref()) {
                                            special_cls = Some(Json::String(first.clone()));
                                            tc.as_mut().map(|m| {
                                                m.insert(
                                                    "cls_token".into(),
                                                    Json::String(first.clone()),
                                                )
                                            });
                                        }
                                    }
                                    let known = is(special_bos.as_ref(), first)
                                        || is(special_cls.as_ref(), first);
                                    self.set_add("bos", known, true);
                                    if !known {
                                        self.warnings.push(format!(
                                            "unknown leading special token '{first}' in tokenizer.json's TemplateProcessing"
                                        ));
                                    }
                                }
                                special_last = template_id(single.last(), "SpecialToken")
                                    .filter(|s| !s.is_empty())
                                    .map(str::to_string);
                                if let Some(last) = &special_last {
                                    if !tc_truthy(&tc) {
                                        special_eos = Some(Json::String(last.clone()));
                                    } else if !is(special_eos.as_ref(), last) {
                                        if !self.types.iter().any(|t| t == "eot") {
                                            self.types.push("eot".into());
                                            tc.as_mut().map(|m| {
                                                m.insert(
                                                    "eot_token".into(),
                                                    special_eos.clone().unwrap_or(Json::Null),
                                                )
                                            });
                                        } else if !self.types.iter().any(|t| t == "eom") {
                                            self.types.push("eom".into());
                                            tc.as_mut().map(|m| {
                                                m.insert(
                                                    "eom_token".into(),
                                                    special_eos.clone().unwrap_or(Json::Null),
                                                )
                                            });
                                        }
                                        special_eos = Some(Json::String(last.clone()));
                                        tc.as_mut().map(|m| {
                                            m.insert("eos_token".into(), Json::String(last.clone()))
                                        });
                                    }
                                    let known = is(special_eos.as_ref(), last);
                                    self.set_add("eos", known, true);
                                }
                            }
                            if !pair.is_empty() {
                                let seq_start = usize::from(
                                    special_first.is_some()
                                        && template_id(pair.first(), "SpecialToken")
                                            == special_first.as_deref(),
                                );
                                let seq_stop_trim = special_last.is_some()
                                    && template_id(pair.last(), "SpecialToken")
                                        == special_last.as_deref();
                                let end = pair.len() - usize::from(seq_stop_trim);
                                let inner: &[Json] = if seq_start <= end {
                                    &pair[seq_start..end]
                                } else {
                                    &[]
                                };
                                if !inner.is_empty() {
                                    let tmpl_a = template_id(inner.first(), "Sequence");
                                    let tmpl_b = template_id(inner.last(), "Sequence");
                                    if tmpl_a == Some("A") && tmpl_b == Some("B") && inner.len() > 2
                                    {
                                        let middle = &inner[1..inner.len() - 1];
                                        let mut add_sep = false;
                                        let sep_or_eos = |s: &str| {
                                            is(special_sep.as_ref(), s)
                                                || is(special_eos.as_ref(), s)
                                        };
                                        if let Some(entry) =
                                            template_id(middle.first(), "SpecialToken")
                                        {
                                            if sep_or_eos(entry) && special_last.is_none() {
                                                add_sep = true;
                                            }
                                        }
                                        if middle.len() == 2 {
                                            if let Some(entry) =
                                                template_id(middle.get(1), "SpecialToken")
                                            {
                                                if sep_or_eos(entry) {
                                                    add_sep = true;
                                                }
                                            }
                                        }
                                        self.set_add("sep", add_sep, true);
                                        if add_sep
                                            && !truthy(special_sep.as_ref())
                                            && tc_truthy(&tc)
                                        {
                                            tc.as_mut().map(|m| {
                                                m.insert(
                                                    "sep_token".into(),
                                                    special_eos.clone().unwrap_or(Json::Null),
                                                )
                                            });
                                        }
                                    }
                                }
                            }
                        }
                        _ => {}
                    }
                }
            }
        }
        let Some(tc) = tc.filter(|m| !m.is_empty()) else {
            return Ok(());
        };
        // The chat template.
        let alt = chat_template_files(files)?;
        let template = match tc.get("chat_template") {
            Some(v) => Some(v.clone()),
            None => alt,
        };
        match template {
            None | Some(Json::Null) => {}
            Some(Json::String(s)) => self.chat_template = Some(ChatTemplate::One(s)),
            Some(Json::Array(list)) => {
                let mut named = Vec::new();
                for item in list {
                    let name = item.get("name").and_then(Json::as_str).unwrap_or("");
                    if let Some(t) = item.get("template").and_then(Json::as_str) {
                        named.push((name.to_string(), t.to_string()));
                    }
                }
                self.chat_template = Some(ChatTemplate::Named(named));
            }
            Some(_) => self.warnings.push(
                "tokenizer_config.json: 'chat_template' is neither a string nor a list: ignored"
                    .into(),
            ),
        }
        for typ in self.types.clone() {
            if let Some(Json::Bool(add)) = tc.get(&format!("add_{typ}_token")) {
                match self.add.iter().find(|(t, _)| *t == typ) {
                    None => self.add.push((typ.clone(), *add)),
                    Some((_, prev)) if prev != add => self.warnings.push(format!(
                        "tokenizer_config.json: add_{typ}_token = {add} disagrees with tokenizer.json's post-processor ({prev}); kept the latter"
                    )),
                    Some(_) => {}
                }
            }
            let content = match tc.get(&format!("{typ}_token")) {
                Some(Json::String(s)) => s.clone(),
                Some(Json::Object(o)) => match o.get("content") {
                    Some(Json::String(s)) => s.clone(),
                    _ => continue,
                },
                _ => continue,
            };
            let id = added_tokens
                .iter()
                .find(|a| a.content.as_deref() == Some(content.as_str()))
                .and_then(|a| a.id)
                .map(Json::from);
            self.set_id(&typ, id.as_ref())?;
        }
        Ok(())
    }

    fn read_config(&mut self, config: &Json) -> Result<()> {
        for typ in self.types.clone() {
            let key = format!("{typ}_token_id");
            let id = match config.get(&key) {
                None => config.get("text_config").and_then(|t| t.get(&key)),
                found => found,
            };
            self.set_id(&typ, id)?;
        }
        Ok(())
    }

    fn merges_from_txt(&mut self, files: &ModelFiles) -> Result<()> {
        let Some(text) = read_text(files, "merges.txt", Need::Vocabulary)? else {
            return Ok(());
        };
        let mut lines = text.lines().peekable();
        if lines.peek().is_some_and(|l| l.trim().starts_with('#')) {
            lines.next();
        }
        for line in lines {
            let parts: Vec<&str> = line.split_whitespace().collect();
            if parts.len() == 2 {
                self.merges.push(format!("{} {}", parts[0], parts[1]));
            }
        }
        Ok(())
    }

    /// The key/values gguf-py's `add_to_gguf` writes (the merges moved, not copied).
    pub fn write(self, md: &mut Metadata) {
        if !self.merges.is_empty() {
            md.set("tokenizer.ggml.merges", GgufArray::String(self.merges));
        }
        for (typ, id) in &self.ids {
            let key = match typ.as_str() {
                "bos" => "tokenizer.ggml.bos_token_id",
                "eos" => "tokenizer.ggml.eos_token_id",
                "unk" => "tokenizer.ggml.unknown_token_id",
                "sep" => "tokenizer.ggml.seperator_token_id",
                "pad" => "tokenizer.ggml.padding_token_id",
                "mask" => "tokenizer.ggml.mask_token_id",
                "eot" => "tokenizer.ggml.eot_token_id",
                "eom" => "tokenizer.ggml.eom_token_id",
                // gguf-py has no key for the others (cls): it skips them too.
                _ => continue,
            };
            md.set(key, GgufValue::U32(*id));
        }
        for (typ, add) in &self.add {
            let key = match typ.as_str() {
                "bos" => "tokenizer.ggml.add_bos_token",
                "eos" => "tokenizer.ggml.add_eos_token",
                "sep" => "tokenizer.ggml.add_sep_token",
                _ => continue,
            };
            md.set(key, GgufValue::Bool(*add));
        }
        match &self.chat_template {
            None => {}
            Some(ChatTemplate::One(t)) => md.set("tokenizer.chat_template", t.as_str()),
            Some(ChatTemplate::Named(list)) => {
                let mut names = Vec::new();
                let mut default = None;
                for (name, template) in list {
                    let name: String = name
                        .chars()
                        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
                        .collect();
                    if name == "default" {
                        default = Some(template.clone());
                    } else if !name.is_empty() {
                        md.set(format!("tokenizer.chat_template.{name}"), template.as_str());
                        if !names.contains(&name) {
                            names.push(name);
                        }
                    }
                }
                if !names.is_empty() {
                    md.set("tokenizer.chat_templates", GgufArray::String(names));
                }
                if let Some(t) = default {
                    md.set("tokenizer.chat_template", t.as_str());
                }
            }
        }
        if let Some(v) = self.lowercase {
            md.set("tokenizer.ggml.normalizer.lowercase", GgufValue::Bool(v));
        }
        if let Some(v) = self.strip_accents {
            md.set(
                "tokenizer.ggml.normalizer.strip_accents",
                GgufValue::Bool(v),
            );
        }
    }
}

/// The template of `chat_template.jinja` (with `additional_chat_templates/*.jinja` as named
/// ones) or `chat_template.json`, when tokenizer_config.json has none. Each is a file the
/// export can do without ([`Need::Extra`]).
fn chat_template_files(files: &ModelFiles) -> Result<Option<Json>> {
    if let Some(main) = read_text(files, "chat_template.jinja", Need::Extra)? {
        const EXTRA_DIR: &str = "additional_chat_templates";
        let mut extra: Vec<String> = match std::fs::read_dir(files.path(EXTRA_DIR)) {
            Ok(entries) => entries
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".jinja") && n.len() > ".jinja".len())
                .collect(),
            Err(_) => Vec::new(),
        };
        if extra.is_empty() {
            return Ok(Some(Json::String(main)));
        }
        extra.sort();
        let mut list = vec![serde_json::json!({"name": "default", "template": main})];
        for file in extra {
            let Some(template) = read_text(files, &format!("{EXTRA_DIR}/{file}"), Need::Extra)?
            else {
                continue;
            };
            let name = file.strip_suffix(".jinja").unwrap_or(&file);
            list.push(serde_json::json!({"name": name, "template": template}));
        }
        Ok(Some(Json::Array(list)))
    } else {
        Ok(read_json(files, "chat_template.json", Need::Extra)?
            .and_then(|j| j.get("chat_template").cloned()))
    }
}
