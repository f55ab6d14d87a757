//! Downloading from the Hugging Face Hub into the shared cache, as huggingface_hub lays it
//! out. The HTTP requests are JavaScript's (`lib/hub.js`, through `lib/remote.js`'s
//! `httpGet`); everything they feed is decided here: which files a revision has and which a
//! download takes ([`plan`], [`glob`]), how each is hashed ([`hash`]), and where it lands
//! in the cache, checked first ([`cache`]).

#[cfg(feature = "fs")]
pub mod cache;
pub mod glob;
pub mod hash;
pub mod plan;
