/* safetensors-node: hand-written declarations shared by the generated bindings below. */

/** The element types of the SafeTensors format (the reference implementation's full list). */
export type DType =
  | 'BOOL' | 'U8' | 'I8' | 'U16' | 'I16' | 'F16' | 'BF16' | 'U32' | 'I32' | 'F32' | 'U64' | 'I64' | 'F64'
  | 'F8_E4M3' | 'F8_E5M2' | 'F8_E8M0' | 'F8_E4M3FNUZ' | 'F8_E5M2FNUZ' | 'F4' | 'F6_E2M3' | 'F6_E3M2' | 'C64'

/**
 * A tensor to write: `dtype` defaults to the dtype of `data` (Float32Array → F32, number[] → F32).
 * A DataView is refused (ERR_INVALID_ARGUMENT): pass a Uint8Array of its bytes.
 */
export interface TensorInput {
  dtype?: DType
  shape: number[]
  data: TypedArray | number[]
}

/** Options of `Model.loadPretrained`. */
export interface LoadPretrainedOptions {
  /** The default form of `getTensor`/`tensors`: `'F32'` upcasts every float type (the MLX-Node behaviour). */
  as?: 'native' | 'F32'
  /**
   * Called as each weight file is opened or parsed (at least once per file). `totalBytes` is
   * null while the total is unknown (the shards of a remote sharded model).
   */
  onProgress?: (p: { file: string; loadedBytes: number; totalBytes: number | null }) => void
}

/** A row-major matrix: an array of rows, or a flat typed array with its dimensions. */
export type Matrix = number[][] | { data: Float32Array | Float64Array; rows: number; cols: number }

/**
 * GGUF quantization: llama-quantize's presets (by its names; Q3_K, Q4_K and Q5_K are its
 * aliases of the _M mixes). Checked against the core's table by crates/core/tests/presets_list.rs.
 */
export type GgufQuantization =
  | 'F32' | 'F16' | 'BF16' | 'Q8_0' | 'Q6_K' | 'Q5_K_M' | 'Q5_K_S' | 'Q5_1' | 'Q5_0' | 'Q4_K_M' | 'Q4_K_S'
  | 'Q4_1' | 'Q4_0' | 'Q3_K_L' | 'Q3_K_M' | 'Q3_K_S' | 'Q2_K' | 'Q3_K' | 'Q4_K' | 'Q5_K'

export interface ConvertOptions {
  to: 'gguf' | 'onnx' | 'safetensors' | 'mlx'
  /**
   * GGUF only: a llama-quantize preset; each tensor gets the type llama-quantize gives it
   * (llama.cpp tensor names get its mixes, 1-D tensors and norms stay F32, integers are never
   * quantized). Without it every tensor keeps its type (F32, F16, BF16, F64, I8–I64).
   */
  quantization?: GgufQuantization
  /**
   * The input is a PEFT LoRA adapter directory (`adapter_config.json` + `adapter_model.safetensors`)
   * and this is its base model's directory: the output (`to: 'gguf'`) is a llama.cpp GGUF LoRA, as
   * `convert_lora_to_gguf.py` writes it. `quantization` is then 'F32', 'F16', 'BF16' or 'Q8_0'
   * (without it the adapter's float types are kept).
   */
  base?: string
  /**
   * A PEFT LoRA adapter directory merged into the input model directory: the output holds the
   * weights PEFT's `merge_and_unload()` gives (a model directory for 'safetensors').
   */
  lora?: string
  /** With `lora`: a multiplier of the adapter's scaling (`lora_alpha / r`); default 1. */
  loraScale?: number
  /** `fsync` the output before renaming it into place, and its directory after (default false: atomic rename only, like `saveFile`). */
  durable?: boolean
  onProgress?: (p: { doneBytes: number; totalBytes: number }) => void
  /**
   * Keys to set in the output's metadata, or to remove (`null`); every other key is kept as the
   * conversion writes it. GGUF types follow gguf-py's: string → STRING, boolean → BOOL, integer
   * → INT32 (INT64 beyond it), other numbers → FLOAT32, bigint → INT64 (UINT64 beyond it), array
   * → ARRAY of its elements' type, typed array → ARRAY of its element type; `{ type: 'UINT32',
   * value }` chooses the type (for an array, its elements'). SafeTensors and MLX metadata hold
   * the value's text. `split.*` keys are refused (see `maxShardBytes`), and so is removing
   * `general.architecture`. Not for ONNX.
   */
  metadata?: Record<string, MetadataEditValue | null>
  /**
   * GGUF only: write a split set as `llama-gguf-split --split-max-size` does, each file's tensor
   * data at most this many bytes (a tensor larger than that gets a file of its own): `out.gguf`
   * becomes `out-00001-of-0000N.gguf` … beside it, listed in the report's `files`.
   */
  maxShardBytes?: number
}

/** A value of `ConvertOptions.metadata`. */
export type MetadataEditValue =
  | string
  | number
  | bigint
  | boolean
  | (string | number | bigint | boolean)[]
  | Int8Array
  | Uint8Array
  | Int16Array
  | Uint16Array
  | Int32Array
  | Uint32Array
  | Float32Array
  | Float64Array
  | BigInt64Array
  | BigUint64Array
  | { type: GgufValueTypeName; value: number | bigint | string | boolean | (number | bigint | string | boolean)[] }

/** GGUF's scalar value types, by the spec's names. */
export type GgufValueTypeName = 'UINT8' | 'INT8' | 'UINT16' | 'INT16' | 'UINT32' | 'INT32' | 'UINT64' | 'INT64' | 'FLOAT32' | 'FLOAT64' | 'BOOL' | 'STRING'

export interface ConvertReport {
  input: string
  output: string
  inputFormat: WeightsFormat | 'model-dir' | 'lora-adapter'
  outputFormat: 'gguf' | 'onnx' | 'safetensors' | 'mlx'
  tensors: number
  inputBytes: number
  outputBytes: number
  quantization?: string
  /** The llama.cpp architecture a GGUF was written for (`bert`, `llama`, `qwen2`, `qwen3`), when the input was a model directory of one we know. */
  architecture?: string
  /** What you should know about the output, e.g. a model directory of an architecture llama.cpp export does not know (its GGUF holds the tensors under their Hugging Face names), or a file of the directory left out because it may not be read (it resolves outside the directory, or is not a regular file). Absent when there is nothing to say. */
  warnings?: string[]
  /** Tensors not written because another name holds the same bytes (a PyTorch checkpoint's tied weights, written once as Hugging Face's convert.py does; each is named in the file's `__metadata__` as `name: keptAs`). Absent when none. */
  dropped?: { name: string; keptAs: string }[]
  /** The files written, relative to `output`, when the output is a directory (a PyTorch model directory or sharded index converted to SafeTensors); for a split GGUF (`maxShardBytes`), the names of its files, beside where `output` would be. */
  files?: string[]
}

export interface FileReport {
  path: string
  /** A model directory reports the format of its weights, and its config. */
  format: WeightsFormat
  fileSize: number
  files: string[]
  numTensors: number
  numParameters: number
  metadata: Record<string, unknown> | null
  config?: Record<string, unknown>
  /** `dtype` is the stored type as the format names it (GGUF: the ggml type, e.g. 'Q8_0'); `byteLength` the bytes stored. */
  tensors: Array<{ name: string; dtype: string; shape: number[]; byteLength: number; file?: string }>
}

export interface ValidationReport {
  path: string
  format: string | null
  ok: boolean
  /** The first 1,000 problems found. */
  errors: Array<{ code: ErrorCode; message: string; tensor?: string }>
  /** How many more problems there were, not listed. */
  omittedErrors: number
}

/** One file `verify` checked. */
export interface VerifiedFile {
  /** Its path in the directory, `/`-separated. */
  file: string
  ok: boolean
  /** The hash that names it (the blob it links to; the Hub's published hash); null when nothing names one. */
  expected: string | null
  /** The hash of its bytes; null when it could not be read. */
  actual: string | null
  /** SHA-256 (LFS files) or the git blob id (small files); null when nothing names a hash. */
  algorithm: 'sha256' | 'git-sha1' | null
  /** Its size (0 when it could not be read). */
  bytes: number
  /** Why it could not be checked (`CODE: message`): missing, unreadable, not a link into the cache's `blobs/`. */
  error?: string
}

/** What `verify` found: every file, in path order. */
export interface VerifyReport {
  dir: string
  /** Every file matched its hash. */
  ok: boolean
  files: VerifiedFile[]
}

/**
 * One tensor as `diff` compares it. The figures are over each side's values as F32 (as
 * `getTensor(name, { as: 'F32' })` reads them), computed in float64; null when the shapes
 * differ, the pair is one-sided, or the figure is undefined or NaN.
 */
export interface TensorDiff {
  /** Its name in A (in B when only B has it). */
  name: string
  /** Its name in B, when the name map pairs it under another name. */
  nameB?: string
  status: 'common' | 'only-a' | 'only-b'
  /** Its name up to the first number (`model.layers.3`, `blk.3`); null outside the layers. */
  layer: string | null
  shapeA: number[] | null
  shapeB: number[] | null
  /** The stored type (`BF16`, `Q4_K`, …). */
  dtypeA: string | null
  dtypeB: string | null
  shapeChanged: boolean
  dtypeChanged: boolean
  /** Every value the same, bit for bit. */
  identical: boolean | null
  numel: number | null
  /** max |a − b| */
  maxAbs: number | null
  /** Σ|a − b| / n */
  meanAbs: number | null
  /** ‖a − b‖ / ‖a‖ (0 when both are all zeros) */
  relError: number | null
  /** a·b / (‖a‖ ‖b‖) */
  cosine: number | null
  /** Why a pair of one shape was not compared (`CODE: message`: a type without an F32 form). */
  error?: string
}

/** Totals of `diff` over a layer, or over everything. */
export interface DiffTotals {
  /** Tensors in both with one shape, compared. */
  compared: number
  onlyA: number
  onlyB: number
  shapeChanged: number
  dtypeChanged: number
  /** Compared tensors that are bit-identical. */
  identical: number
  /** Elements compared. */
  numel: number
  maxAbs: number | null
  /** Σ|Δ| / Σn over the compared tensors. */
  meanAbs: number | null
  /** sqrt(Σ‖Δ‖²) / sqrt(Σ‖a‖²) over the compared tensors. */
  relError: number | null
  /** The lowest cosine similarity of a compared tensor. */
  minCosine: number | null
}

/** A layer's totals. */
export interface LayerDiff extends DiffTotals {
  /** The name prefix up to the layer number; null for the tensors outside the layers. */
  layer: string | null
}

/** What `diff` found. */
export interface DiffReport {
  a: string
  b: string
  formatA: WeightsFormat
  formatB: WeightsFormat
  /** How tensors were paired: by name, or through llama.cpp's converter's name map. */
  nameMap: 'direct' | 'llama.cpp'
  /** A's tensors in A's order, then those only in B. */
  tensors: TensorDiff[]
  /** In the order of their first tensor; the tensors outside the layers last. */
  layers: LayerDiff[]
  summary: DiffTotals
  /** Things to know (a name map that could not be made, …). */
  warnings: string[]
}

/** The stable `code` of every error this package throws or rejects with (docs/api.md, "Errors"). */
export type ErrorCode =
  | 'ERR_NOT_FOUND'
  | 'ERR_IO'
  | 'ERR_HEADER_TOO_SMALL'
  | 'ERR_HEADER_TOO_LARGE'
  | 'ERR_INVALID_HEADER'
  | 'ERR_INVALID_OFFSETS'
  | 'ERR_SIZE_MISMATCH'
  | 'ERR_INCOMPLETE_FILE'
  | 'ERR_UNSUPPORTED_DTYPE'
  | 'ERR_INVALID_ARGUMENT'
  | 'ERR_NOT_FITTED'
  | 'ERR_UNSAFE_PATH'
  | 'ERR_NO_WEIGHTS'
  | 'ERR_INVALID_MODEL'
  | 'ERR_INVALID_GGUF'
  | 'ERR_INVALID_MLX'
  | 'ERR_UNSAFE_PICKLE'
  | 'ERR_UNKNOWN_FORMAT'
  | 'ERR_INTERNAL'
  | 'ERR_CLOSED'
  | 'ERR_HASH_MISMATCH'
  | 'ERR_ABORTED'

/** What every failure is: an `Error` with a stable `code`, and the file and tensor concerned where there are ones. */
export interface SafeTensorsError extends Error {
  code: ErrorCode
  /** The file, directory or URL concerned. */
  path?: string
  /** The tensor concerned. */
  tensor?: string
}

/** The formats `openWeights` reads. */
export type WeightsFormat = 'safetensors' | 'sharded-safetensors' | 'gguf' | 'pytorch' | 'numpy' | 'mlx'

/** Options of `openWeights` / `openWeightsSync`. */
export interface OpenWeightsOptions {
  /** Read the input as this format instead of recognising it by its bytes. */
  format?: WeightsFormat
  /** 'mmap' (default) or 'read': plain reads (SafeTensors: per tensor; GGUF, PyTorch, NumPy: the whole file, once; larger than memory: ERR_IO). */
  backend?: 'mmap' | 'read'
}

/** Options of `SafeTensorsFile.open` / `openAsync`. */
export interface OpenOptions {
  /** 'mmap' (default): a private copy-on-write memory map; 'read': plain reads per tensor (network file systems). */
  backend?: 'mmap' | 'read'
}

/**
 * A GGUF metadata value: UINT8…INT32, FLOAT32 and FLOAT64 as numbers, UINT64/INT64 as bigint,
 * BOOL as boolean, STRING as string; an array of numbers as the typed array of its element
 * type (ARRAY[FLOAT32] → Float32Array, ARRAY[UINT64] → BigUint64Array, …), an array of
 * strings or booleans as a JS array.
 */
export type GgufValue =
  | number
  | bigint
  | string
  | boolean
  | Uint8Array
  | Int8Array
  | Uint16Array
  | Int16Array
  | Uint32Array
  | Int32Array
  | Float32Array
  | Float64Array
  | BigUint64Array
  | BigInt64Array
  | string[]
  | boolean[]
