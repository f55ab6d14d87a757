//! ONNX export of the linear models: the subset of `onnx.proto` they need, as prost messages
//! with the exact field numbers of the official schema (no protoc at build time), and the
//! graph builders.
//!
//! `onnx.proto` is proto2: scalars are `optional` with presence (so an attribute `axis = 0`
//! is still written, which the ONNX checker requires), `dims` is not packed, and the numeric
//! data fields of `TensorProto` are declared `[packed = true]`. Fields not listed here are
//! skipped when decoding, as protobuf requires.
//!
//! Exported models use IR version 8 and the default-domain opset 17, so they load in any
//! ONNX Runtime since 1.13.

use crate::error::{CoreError, Result};
use prost::Message;

/// IR version written (ONNX 1.10+).
pub const IR_VERSION: i64 = 8;
/// Default-domain ("ai.onnx") opset the graphs are written against.
pub const OPSET_VERSION: i64 = 17;
pub const PRODUCER_NAME: &str = "safetensors-node";

#[derive(Clone, PartialEq, Message)]
pub struct ModelProto {
    #[prost(int64, optional, tag = "1")]
    pub ir_version: Option<i64>,
    #[prost(message, repeated, tag = "8")]
    pub opset_import: Vec<OperatorSetIdProto>,
    #[prost(string, optional, tag = "2")]
    pub producer_name: Option<String>,
    #[prost(string, optional, tag = "3")]
    pub producer_version: Option<String>,
    #[prost(string, optional, tag = "4")]
    pub domain: Option<String>,
    #[prost(int64, optional, tag = "5")]
    pub model_version: Option<i64>,
    #[prost(string, optional, tag = "6")]
    pub doc_string: Option<String>,
    #[prost(message, optional, tag = "7")]
    pub graph: Option<GraphProto>,
    #[prost(message, repeated, tag = "14")]
    pub metadata_props: Vec<StringStringEntryProto>,
}

#[derive(Clone, PartialEq, Message)]
pub struct OperatorSetIdProto {
    #[prost(string, optional, tag = "1")]
    pub domain: Option<String>,
    #[prost(int64, optional, tag = "2")]
    pub version: Option<i64>,
}

#[derive(Clone, PartialEq, Message)]
pub struct StringStringEntryProto {
    #[prost(string, optional, tag = "1")]
    pub key: Option<String>,
    #[prost(string, optional, tag = "2")]
    pub value: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
pub struct GraphProto {
    #[prost(message, repeated, tag = "1")]
    pub node: Vec<NodeProto>,
    #[prost(string, optional, tag = "2")]
    pub name: Option<String>,
    #[prost(message, repeated, tag = "5")]
    pub initializer: Vec<TensorProto>,
    #[prost(string, optional, tag = "10")]
    pub doc_string: Option<String>,
    #[prost(message, repeated, tag = "11")]
    pub input: Vec<ValueInfoProto>,
    #[prost(message, repeated, tag = "12")]
    pub output: Vec<ValueInfoProto>,
    #[prost(message, repeated, tag = "13")]
    pub value_info: Vec<ValueInfoProto>,
}

#[derive(Clone, PartialEq, Message)]
pub struct NodeProto {
    #[prost(string, repeated, tag = "1")]
    pub input: Vec<String>,
    #[prost(string, repeated, tag = "2")]
    pub output: Vec<String>,
    #[prost(string, optional, tag = "3")]
    pub name: Option<String>,
    #[prost(string, optional, tag = "4")]
    pub op_type: Option<String>,
    #[prost(string, optional, tag = "7")]
    pub domain: Option<String>,
    #[prost(message, repeated, tag = "5")]
    pub attribute: Vec<AttributeProto>,
    #[prost(string, optional, tag = "6")]
    pub doc_string: Option<String>,
}

/// `AttributeProto.AttributeType` (the values used here and their neighbours).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum AttributeType {
    Undefined = 0,
    Float = 1,
    Int = 2,
    String = 3,
    Tensor = 4,
    Graph = 5,
    Floats = 6,
    Ints = 7,
    Strings = 8,
    Tensors = 9,
    Graphs = 10,
    SparseTensor = 11,
    SparseTensors = 12,
    TypeProto = 13,
    TypeProtos = 14,
}

#[derive(Clone, PartialEq, Message)]
pub struct AttributeProto {
    #[prost(string, optional, tag = "1")]
    pub name: Option<String>,
    #[prost(string, optional, tag = "21")]
    pub ref_attr_name: Option<String>,
    #[prost(string, optional, tag = "13")]
    pub doc_string: Option<String>,
    #[prost(enumeration = "AttributeType", optional, tag = "20")]
    pub r#type: Option<i32>,
    #[prost(float, optional, tag = "2")]
    pub f: Option<f32>,
    #[prost(int64, optional, tag = "3")]
    pub i: Option<i64>,
    #[prost(bytes = "vec", optional, tag = "4")]
    pub s: Option<Vec<u8>>,
    #[prost(message, optional, tag = "5")]
    pub t: Option<TensorProto>,
    #[prost(float, repeated, packed = "false", tag = "7")]
    pub floats: Vec<f32>,
    #[prost(int64, repeated, packed = "false", tag = "8")]
    pub ints: Vec<i64>,
    #[prost(bytes = "vec", repeated, tag = "9")]
    pub strings: Vec<Vec<u8>>,
}

/// `TensorProto.DataType` values (an `int32` field in the schema).
pub mod data_type {
    pub const FLOAT: i32 = 1;
    pub const UINT8: i32 = 2;
    pub const INT8: i32 = 3;
    pub const INT32: i32 = 6;
    pub const INT64: i32 = 7;
    pub const STRING: i32 = 8;
    pub const BOOL: i32 = 9;
    pub const FLOAT16: i32 = 10;
    pub const DOUBLE: i32 = 11;
}

#[derive(Clone, PartialEq, Message)]
pub struct TensorProto {
    #[prost(int64, repeated, packed = "false", tag = "1")]
    pub dims: Vec<i64>,
    #[prost(int32, optional, tag = "2")]
    pub data_type: Option<i32>,
    #[prost(float, repeated, tag = "4")]
    pub float_data: Vec<f32>,
    #[prost(int32, repeated, tag = "5")]
    pub int32_data: Vec<i32>,
    #[prost(bytes = "vec", repeated, tag = "6")]
    pub string_data: Vec<Vec<u8>>,
    #[prost(int64, repeated, tag = "7")]
    pub int64_data: Vec<i64>,
    #[prost(string, optional, tag = "8")]
    pub name: Option<String>,
    #[prost(string, optional, tag = "12")]
    pub doc_string: Option<String>,
    #[prost(bytes = "vec", optional, tag = "9")]
    pub raw_data: Option<Vec<u8>>,
    #[prost(double, repeated, tag = "10")]
    pub double_data: Vec<f64>,
    #[prost(uint64, repeated, tag = "11")]
    pub uint64_data: Vec<u64>,
}

#[derive(Clone, PartialEq, Message)]
pub struct ValueInfoProto {
    #[prost(string, optional, tag = "1")]
    pub name: Option<String>,
    #[prost(message, optional, tag = "2")]
    pub r#type: Option<TypeProto>,
    #[prost(string, optional, tag = "3")]
    pub doc_string: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
pub struct TypeProto {
    #[prost(oneof = "TypeProtoValue", tags = "1")]
    pub value: Option<TypeProtoValue>,
    #[prost(string, optional, tag = "6")]
    pub denotation: Option<String>,
}

/// `TypeProto.value`; only tensor types are used here.
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum TypeProtoValue {
    #[prost(message, tag = "1")]
    TensorType(TypeProtoTensor),
}

/// `TypeProto.Tensor`.
#[derive(Clone, PartialEq, Message)]
pub struct TypeProtoTensor {
    #[prost(int32, optional, tag = "1")]
    pub elem_type: Option<i32>,
    #[prost(message, optional, tag = "2")]
    pub shape: Option<TensorShapeProto>,
}

#[derive(Clone, PartialEq, Message)]
pub struct TensorShapeProto {
    #[prost(message, repeated, tag = "1")]
    pub dim: Vec<Dimension>,
}

/// `TensorShapeProto.Dimension`.
#[derive(Clone, PartialEq, Message)]
pub struct Dimension {
    #[prost(oneof = "DimensionValue", tags = "1, 2")]
    pub value: Option<DimensionValue>,
    #[prost(string, optional, tag = "3")]
    pub denotation: Option<String>,
}

/// `TensorShapeProto.Dimension.value`: a fixed size or a symbolic name.
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum DimensionValue {
    #[prost(int64, tag = "1")]
    DimValue(i64),
    #[prost(string, tag = "2")]
    DimParam(String),
}

/// Decode a serialized model; malformed bytes are ERR_INVALID_MODEL.
pub fn decode_model(bytes: &[u8]) -> Result<ModelProto> {
    ModelProto::decode(bytes)
        .map_err(|e| CoreError::invalid_model(format!("not an ONNX model: {e}")))
}

// ---------------------------------------------------------------------------------------
// Graph building helpers.

/// A dimension of a declared input/output shape.
enum Dim {
    Fixed(usize),
    /// The symbolic batch size.
    Batch,
}

/// Name of the symbolic batch dimension of every input and output.
pub const BATCH_DIM: &str = "N";

fn value_info(name: &str, elem_type: i32, dims: &[Dim]) -> ValueInfoProto {
    let dim = dims
        .iter()
        .map(|d| Dimension {
            value: Some(match d {
                Dim::Fixed(n) => DimensionValue::DimValue(*n as i64),
                Dim::Batch => DimensionValue::DimParam(BATCH_DIM.to_string()),
            }),
            denotation: None,
        })
        .collect();
    ValueInfoProto {
        name: Some(name.to_string()),
        r#type: Some(TypeProto {
            value: Some(TypeProtoValue::TensorType(TypeProtoTensor {
                elem_type: Some(elem_type),
                shape: Some(TensorShapeProto { dim }),
            })),
            denotation: None,
        }),
        doc_string: None,
    }
}

fn float_tensor(name: &str, dims: &[usize], values: Vec<f32>) -> TensorProto {
    TensorProto {
        dims: dims.iter().map(|&d| d as i64).collect(),
        data_type: Some(data_type::FLOAT),
        float_data: values,
        name: Some(name.to_string()),
        ..Default::default()
    }
}

fn int64_tensor(name: &str, dims: &[usize], values: Vec<i64>) -> TensorProto {
    TensorProto {
        dims: dims.iter().map(|&d| d as i64).collect(),
        data_type: Some(data_type::INT64),
        int64_data: values,
        name: Some(name.to_string()),
        ..Default::default()
    }
}

fn int_attribute(name: &str, value: i64) -> AttributeProto {
    AttributeProto {
        name: Some(name.to_string()),
        r#type: Some(AttributeType::Int as i32),
        i: Some(value),
        ..Default::default()
    }
}

fn node(op_type: &str, inputs: &[&str], output: &str, attribute: Vec<AttributeProto>) -> NodeProto {
    NodeProto {
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: vec![output.to_string()],
        // Node names are unique because every node has a distinct output here.
        name: Some(format!("{op_type}_{output}")),
        op_type: Some(op_type.to_string()),
        domain: Some(String::new()),
        attribute,
        doc_string: None,
    }
}

fn model(graph: GraphProto, doc: &str) -> Vec<u8> {
    ModelProto {
        ir_version: Some(IR_VERSION),
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(OPSET_VERSION),
        }],
        producer_name: Some(PRODUCER_NAME.to_string()),
        producer_version: Some(env!("CARGO_PKG_VERSION").to_string()),
        domain: None,
        model_version: Some(1),
        doc_string: Some(doc.to_string()),
        graph: Some(graph),
        metadata_props: Vec::new(),
    }
    .encode_to_vec()
}

fn check_finite(what: &str, values: &[f32]) -> Result<()> {
    if values.iter().all(|v| v.is_finite()) {
        Ok(())
    } else {
        Err(CoreError::invalid_argument(format!(
            "{what} must be finite numbers"
        )))
    }
}

/// The ONNX model of a linear regression `y = x · coefficients + intercept`.
///
/// Input `input`: float `[N, n_features]` (N symbolic); output `variable`: float `[N, 1]`;
/// graph `MatMul(input, coefficients [n_features, 1]) + intercept [1]`.
pub fn linear_regression_model(coefficients: &[f32], intercept: f32) -> Result<Vec<u8>> {
    let n_features = coefficients.len();
    if n_features == 0 {
        return Err(CoreError::invalid_argument(
            "a linear regression needs at least one coefficient",
        ));
    }
    check_finite("coefficients and intercept", coefficients)?;
    check_finite("coefficients and intercept", &[intercept])?;
    let graph = GraphProto {
        name: Some("linear_regression".to_string()),
        node: vec![
            node("MatMul", &["input", "coefficients"], "product", vec![]),
            node("Add", &["product", "intercept"], "variable", vec![]),
        ],
        initializer: vec![
            float_tensor("coefficients", &[n_features, 1], coefficients.to_vec()),
            float_tensor("intercept", &[1], vec![intercept]),
        ],
        input: vec![value_info(
            "input",
            data_type::FLOAT,
            &[Dim::Batch, Dim::Fixed(n_features)],
        )],
        output: vec![value_info(
            "variable",
            data_type::FLOAT,
            &[Dim::Batch, Dim::Fixed(1)],
        )],
        ..Default::default()
    };
    Ok(model(
        graph,
        "Linear regression exported by safetensors-node",
    ))
}

/// The ONNX model of a logistic-regression classifier, with scikit-learn's conventions.
///
/// * `coefficients`: binary (`n_classes == 2`): `n_features` values, the weights of the
///   positive class; multiclass: `n_classes × n_features` values, row-major by class
///   (scikit-learn's `coef_`). `intercepts`: 1 value (binary) or `n_classes`.
/// * `classes`: the class labels, `n_classes` of them, in column order.
///
/// Input `input`: float `[N, n_features]`. Outputs:
/// * `label`: int64 `[N]`, the class of the highest score (`ArgMax` over the logits, first
///   on ties, then `Gather` from the labels). For two classes the logits are `[-z, z]`, so
///   the positive class wins exactly when `z > 0`, as in scikit-learn's `predict`.
/// * `probabilities`: float `[N, n_classes]`: binary `[1 - σ(z), σ(z)]` with
///   `z = x · w + b`; multiclass `softmax(x · W + b)` over the classes.
pub fn logistic_regression_model(
    coefficients: &[f32],
    intercepts: &[f32],
    n_classes: usize,
    n_features: usize,
    classes: &[i32],
) -> Result<Vec<u8>> {
    if n_classes < 2 || n_features == 0 {
        return Err(CoreError::invalid_argument(format!(
            "a logistic regression needs at least 2 classes and 1 feature, got {n_classes} and \
             {n_features}"
        )));
    }
    let binary = n_classes == 2;
    let (weight_cols, n_intercepts) = if binary {
        (1, 1)
    } else {
        (n_classes, n_classes)
    };
    let expected_coefficients = n_features.checked_mul(weight_cols);
    if expected_coefficients != Some(coefficients.len())
        || intercepts.len() != n_intercepts
        || classes.len() != n_classes
    {
        return Err(CoreError::invalid_argument(format!(
            "{n_classes} classes and {n_features} features need {} coefficients, \
             {n_intercepts} intercepts and {n_classes} class labels; got {}, {} and {}",
            n_features.saturating_mul(weight_cols),
            coefficients.len(),
            intercepts.len(),
            classes.len()
        )));
    }
    check_finite("coefficients and intercepts", coefficients)?;
    check_finite("coefficients and intercepts", intercepts)?;

    // MatMul wants [n_features, columns]; scikit-learn's coef_ is [classes, n_features].
    let weights: Vec<f32> = if binary {
        coefficients.to_vec()
    } else {
        (0..n_features)
            .flat_map(|f| (0..n_classes).map(move |c| coefficients[c * n_features + f]))
            .collect()
    };
    let mut initializer = vec![
        float_tensor("coefficients", &[n_features, weight_cols], weights),
        float_tensor("intercepts", &[n_intercepts], intercepts.to_vec()),
        int64_tensor(
            "classes",
            &[n_classes],
            classes.iter().map(|&c| i64::from(c)).collect(),
        ),
    ];
    let argmax_attrs = || vec![int_attribute("axis", 1), int_attribute("keepdims", 0)];
    let gather_attrs = vec![int_attribute("axis", 0)];
    let mut nodes = vec![
        node("MatMul", &["input", "coefficients"], "product", vec![]),
        node("Add", &["product", "intercepts"], "logits", vec![]),
    ];
    if binary {
        initializer.push(float_tensor("one", &[1], vec![1.0]));
        nodes.extend([
            node("Sigmoid", &["logits"], "positive", vec![]),
            node("Sub", &["one", "positive"], "negative", vec![]),
            node(
                "Concat",
                &["negative", "positive"],
                "probabilities",
                vec![int_attribute("axis", 1)],
            ),
            node("Neg", &["logits"], "negated_logits", vec![]),
            node(
                "Concat",
                &["negated_logits", "logits"],
                "class_scores",
                vec![int_attribute("axis", 1)],
            ),
            node("ArgMax", &["class_scores"], "label_index", argmax_attrs()),
        ]);
    } else {
        nodes.extend([
            node(
                "Softmax",
                &["logits"],
                "probabilities",
                vec![int_attribute("axis", -1)],
            ),
            node("ArgMax", &["logits"], "label_index", argmax_attrs()),
        ]);
    }
    nodes.push(node(
        "Gather",
        &["classes", "label_index"],
        "label",
        gather_attrs,
    ));

    let graph = GraphProto {
        name: Some("logistic_regression".to_string()),
        node: nodes,
        initializer,
        input: vec![value_info(
            "input",
            data_type::FLOAT,
            &[Dim::Batch, Dim::Fixed(n_features)],
        )],
        output: vec![
            value_info("label", data_type::INT64, &[Dim::Batch]),
            value_info(
                "probabilities",
                data_type::FLOAT,
                &[Dim::Batch, Dim::Fixed(n_classes)],
            ),
        ],
        ..Default::default()
    };
    Ok(model(
        graph,
        "Logistic regression exported by safetensors-node",
    ))
}
