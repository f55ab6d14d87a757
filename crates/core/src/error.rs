//! The one error type of the core. Every failure carries a [`ErrorKind`] whose
//! [`ErrorKind::code`] is the stable `code` JavaScript users see (docs/api.md, Errors),
//! plus the file and tensor it concerns, so messages can name both.

use std::fmt;
use std::path::Path;

/// What went wrong, as a stable, machine-readable category.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    NotFound,
    Io,
    HeaderTooSmall,
    HeaderTooLarge,
    InvalidHeader,
    InvalidOffsets,
    SizeMismatch,
    IncompleteFile,
    UnsupportedDtype,
    InvalidArgument,
    NotFitted,
    UnsafePath,
    NoWeights,
    InvalidModel,
    InvalidGguf,
    InvalidMlx,
    /// A pickle asks for a global (or a call) outside the weights-only allow-list.
    UnsafePickle,
    /// The input is not a format this package reads (or not the one asked for): the message
    /// names what it looks like.
    UnknownFormat,
    /// A bug in this package (a worker thread panicked): never the input's or the caller's
    /// fault, so it is neither ERR_IO nor ERR_INVALID_ARGUMENT.
    Internal,
    /// A weights file used after its `close()`.
    Closed,
    /// Bytes whose hash is not the one published for them (a download, a verified file).
    HashMismatch,
}

impl ErrorKind {
    /// The `code` of the JavaScript error (docs/api.md, Errors).
    pub fn code(self) -> &'static str {
        match self {
            ErrorKind::NotFound => "ERR_NOT_FOUND",
            ErrorKind::Io => "ERR_IO",
            ErrorKind::HeaderTooSmall => "ERR_HEADER_TOO_SMALL",
            ErrorKind::HeaderTooLarge => "ERR_HEADER_TOO_LARGE",
            ErrorKind::InvalidHeader => "ERR_INVALID_HEADER",
            ErrorKind::InvalidOffsets => "ERR_INVALID_OFFSETS",
            ErrorKind::SizeMismatch => "ERR_SIZE_MISMATCH",
            ErrorKind::IncompleteFile => "ERR_INCOMPLETE_FILE",
            ErrorKind::UnsupportedDtype => "ERR_UNSUPPORTED_DTYPE",
            ErrorKind::InvalidArgument => "ERR_INVALID_ARGUMENT",
            ErrorKind::NotFitted => "ERR_NOT_FITTED",
            ErrorKind::UnsafePath => "ERR_UNSAFE_PATH",
            ErrorKind::NoWeights => "ERR_NO_WEIGHTS",
            ErrorKind::InvalidModel => "ERR_INVALID_MODEL",
            ErrorKind::InvalidGguf => "ERR_INVALID_GGUF",
            ErrorKind::InvalidMlx => "ERR_INVALID_MLX",
            ErrorKind::UnsafePickle => "ERR_UNSAFE_PICKLE",
            ErrorKind::UnknownFormat => "ERR_UNKNOWN_FORMAT",
            ErrorKind::Internal => "ERR_INTERNAL",
            ErrorKind::Closed => "ERR_CLOSED",
            ErrorKind::HashMismatch => "ERR_HASH_MISMATCH",
        }
    }
}

/// A failure: kind, message, and (where known) the file and the tensor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoreError {
    kind: ErrorKind,
    message: String,
    path: Option<String>,
    tensor: Option<String>,
}

pub type Result<T, E = CoreError> = std::result::Result<T, E>;

impl CoreError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        CoreError {
            kind,
            message: message.into(),
            path: None,
            tensor: None,
        }
    }

    /// Attach the file this error concerns, unless one is already attached
    /// (the innermost, most precise path wins).
    pub fn with_path(mut self, path: impl AsRef<Path>) -> Self {
        if self.path.is_none() {
            self.path = Some(path.as_ref().display().to_string());
        }
        self
    }

    /// Attach the tensor this error concerns, unless one is already attached.
    pub fn with_tensor(mut self, name: impl Into<String>) -> Self {
        if self.tensor.is_none() {
            self.tensor = Some(name.into());
        }
        self
    }

    /// An operating-system error, mapped to ERR_NOT_FOUND or ERR_IO; the OS text is kept.
    pub fn io(err: std::io::Error, path: impl AsRef<Path>) -> Self {
        let path = path.as_ref();
        let kind = if err.kind() == std::io::ErrorKind::NotFound {
            ErrorKind::NotFound
        } else if is_bad_path(&err, path) {
            ErrorKind::InvalidArgument
        } else {
            ErrorKind::Io
        };
        CoreError::new(kind, err.to_string()).with_path(path)
    }

    /// ERR_INTERNAL for a panic caught in `what` (e.g. "a worker thread"): a bug, reported
    /// with the panic's message instead of taking the process down.
    pub fn panicked(what: &str, payload: &(dyn std::any::Any + Send)) -> Self {
        let detail = payload
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
            .unwrap_or("no message");
        CoreError::new(
            ErrorKind::Internal,
            format!(
                "internal error: {what} panicked ({detail}); this is a bug in safetensors-node, \
                 please report it"
            ),
        )
    }

    pub fn kind(&self) -> ErrorKind {
        self.kind
    }
    pub fn code(&self) -> &'static str {
        self.kind.code()
    }
    /// The message without the path/tensor prefix.
    pub fn detail(&self) -> &str {
        &self.message
    }
    pub fn path(&self) -> Option<&str> {
        self.path.as_deref()
    }
    pub fn tensor(&self) -> Option<&str> {
        self.tensor.as_deref()
    }
}

impl fmt::Display for CoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(path) = &self.path {
            write!(f, "{path}: ")?;
        }
        if let Some(tensor) = &self.tensor {
            write!(f, "tensor '{}': ", crate::names::printable(tensor))?;
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for CoreError {}

/// Whether an I/O error is the caller's path itself being unusable: a NUL byte in it (no
/// system call can take one) or a name too long for the file system.
fn is_bad_path(err: &std::io::Error, path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        (err.kind() == std::io::ErrorKind::InvalidInput && path.as_os_str().as_bytes().contains(&0))
            || err.raw_os_error() == Some(libc::ENAMETOOLONG)
    }
    #[cfg(not(unix))]
    {
        let _ = (err, path);
        false
    }
}

/// Shorthand constructors, one per kind, so call sites read as the rule they enforce.
macro_rules! kind_ctor {
    ($($fn:ident => $kind:ident),* $(,)?) => {
        impl CoreError {
            $(pub fn $fn(message: impl Into<String>) -> Self { CoreError::new(ErrorKind::$kind, message) })*
        }
    };
}
kind_ctor! {
    not_found => NotFound,
    header_too_small => HeaderTooSmall,
    header_too_large => HeaderTooLarge,
    invalid_header => InvalidHeader,
    invalid_offsets => InvalidOffsets,
    size_mismatch => SizeMismatch,
    incomplete_file => IncompleteFile,
    unsupported_dtype => UnsupportedDtype,
    invalid_argument => InvalidArgument,
    not_fitted => NotFitted,
    unsafe_path => UnsafePath,
    no_weights => NoWeights,
    invalid_model => InvalidModel,
    invalid_gguf => InvalidGguf,
    invalid_mlx => InvalidMlx,
    unsafe_pickle => UnsafePickle,
    unknown_format => UnknownFormat,
    closed => Closed,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::printable;

    #[cfg(feature = "fs")]
    #[test]
    fn unusable_paths_are_the_callers_error_other_io_failures_are_not() {
        let dir = tempfile::tempdir().unwrap();
        let nul = dir.path().join("a\0b");
        let long = dir.path().join("n".repeat(300));
        for path in [&nul, &long] {
            let err = std::fs::File::open(path).unwrap_err();
            let e = CoreError::io(err, path);
            assert_eq!(e.code(), "ERR_INVALID_ARGUMENT", "{e}");
        }
        let missing = dir.path().join("missing");
        let e = CoreError::io(std::fs::File::open(&missing).unwrap_err(), &missing);
        assert_eq!(e.code(), "ERR_NOT_FOUND");
        let e = CoreError::io(std::io::Error::other("disk on fire"), &missing);
        assert_eq!(e.code(), "ERR_IO");
        // An invalid-input error about something other than the path stays ERR_IO.
        let e = CoreError::io(
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "bad flags"),
            &missing,
        );
        assert_eq!(e.code(), "ERR_IO");
    }

    #[test]
    fn display_names_file_and_tensor() {
        let e = CoreError::size_mismatch("expected 8 bytes, found 4")
            .with_tensor("w")
            .with_path("/m/a.safetensors");
        assert_eq!(e.code(), "ERR_SIZE_MISMATCH");
        assert_eq!(
            e.to_string(),
            "/m/a.safetensors: tensor 'w': expected 8 bytes, found 4"
        );
    }

    #[test]
    fn names_are_shown_escaped_and_cut() {
        assert!(matches!(
            printable("blk.0.attn_q"),
            std::borrow::Cow::Borrowed(_)
        ));
        assert_eq!(
            printable("a\x1b[2J\x1b]0;t\x07\r\n\t\0\x7f\u{9b}\u{202e}\u{2066}é"),
            "a\\x1b[2J\\x1b]0;t\\x07\\r\\n\\t\\x00\\x7f\\x9b\\u{202e}\\u{2066}é"
        );
        let long = "é".repeat(5 << 20);
        let shown = printable(&long);
        assert_eq!(shown, format!("{}… ({} bytes)", "é".repeat(200), 10 << 20));
        assert_eq!(printable(&long[..400]), long[..400]);
        let e = CoreError::invalid_gguf("x").with_tensor("\x1b[2Jw");
        assert_eq!(e.to_string(), "tensor '\\x1b[2Jw': x");
        assert_eq!(e.tensor(), Some("\x1b[2Jw"));
    }

    #[test]
    fn innermost_context_wins() {
        let e = CoreError::invalid_model("x")
            .with_path("/shard.safetensors")
            .with_path("/dir");
        assert_eq!(e.path(), Some("/shard.safetensors"));
    }

    #[test]
    fn io_not_found_maps_to_not_found() {
        let e = CoreError::io(std::io::Error::from(std::io::ErrorKind::NotFound), "/x");
        assert_eq!(e.code(), "ERR_NOT_FOUND");
        let e = CoreError::io(
            std::io::Error::from(std::io::ErrorKind::PermissionDenied),
            "/x",
        );
        assert_eq!(e.code(), "ERR_IO");
    }
}
