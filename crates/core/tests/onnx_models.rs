//! The ONNX builders: what they encode decodes back (prost round trip), the graphs have the
//! intended structure, and a small interpreter of the operators used computes the expected
//! formulas on a few rows.

use prost::Message;
use stcore::format::onnx::{
    data_type, decode_model, linear_regression_model, logistic_regression_model, AttributeType,
    DimensionValue, GraphProto, ModelProto, NodeProto, TensorProto, TypeProtoValue, IR_VERSION,
    OPSET_VERSION,
};
use std::collections::HashMap;

#[derive(Debug, Clone, PartialEq)]
enum Data {
    F32(Vec<f32>),
    I64(Vec<i64>),
}

#[derive(Debug, Clone, PartialEq)]
struct Tensor {
    shape: Vec<usize>,
    data: Data,
}

impl Tensor {
    fn f32(&self) -> &[f32] {
        match &self.data {
            Data::F32(v) => v,
            Data::I64(_) => panic!("expected float tensor"),
        }
    }
}

fn from_proto(t: &TensorProto) -> Tensor {
    let shape = t.dims.iter().map(|&d| d as usize).collect();
    let data = match t.data_type {
        Some(data_type::FLOAT) => Data::F32(t.float_data.clone()),
        Some(data_type::INT64) => Data::I64(t.int64_data.clone()),
        other => panic!("unexpected data type {other:?}"),
    };
    Tensor { shape, data }
}

fn attr_i(node: &NodeProto, name: &str) -> Option<i64> {
    node.attribute
        .iter()
        .find(|a| a.name.as_deref() == Some(name))
        .map(|a| {
            assert_eq!(a.r#type, Some(AttributeType::Int as i32));
            a.i.expect("int attribute has a value")
        })
}

/// Value at row `r`, column `c` of a tensor broadcast to [n, cols] (shapes [n, cols],
/// [1, cols], [cols], [1] or [n, 1]).
fn at(t: &Tensor, r: usize, c: usize) -> f32 {
    let v = t.f32();
    match t.shape.as_slice() {
        [1] => v[0],
        [cols] => v[c % cols],
        [rows, cols] => v[(r % rows) * cols + (c % cols)],
        s => panic!("unsupported broadcast of {s:?}"),
    }
}

fn rows_cols(a: &Tensor, b: &Tensor) -> (usize, usize) {
    let dims = |t: &Tensor| match t.shape.as_slice() {
        [n] => (1, *n),
        [r, c] => (*r, *c),
        s => panic!("rank of {s:?}"),
    };
    let (ra, ca) = dims(a);
    let (rb, cb) = dims(b);
    (ra.max(rb), ca.max(cb))
}

fn elementwise(a: &Tensor, b: &Tensor, f: impl Fn(f32, f32) -> f32) -> Tensor {
    let (rows, cols) = rows_cols(a, b);
    let mut v = Vec::new();
    for r in 0..rows {
        for c in 0..cols {
            v.push(f(at(a, r, c), at(b, r, c)));
        }
    }
    Tensor {
        shape: vec![rows, cols],
        data: Data::F32(v),
    }
}

/// Run a graph made of the operators the builders use.
fn run(graph: &GraphProto, input: Tensor) -> HashMap<String, Tensor> {
    let mut env: HashMap<String, Tensor> = HashMap::new();
    for init in &graph.initializer {
        env.insert(init.name.clone().unwrap(), from_proto(init));
    }
    env.insert(graph.input[0].name.clone().unwrap(), input);
    for node in &graph.node {
        let arg = |i: usize| env[&node.input[i]].clone();
        let out = match node.op_type.as_deref().unwrap() {
            "MatMul" => {
                let (a, b) = (arg(0), arg(1));
                let (n, k, m) = (a.shape[0], a.shape[1], b.shape[1]);
                assert_eq!(b.shape[0], k);
                let mut v = vec![0f32; n * m];
                for r in 0..n {
                    for c in 0..m {
                        v[r * m + c] = (0..k)
                            .map(|j| a.f32()[r * k + j] * b.f32()[j * m + c])
                            .sum();
                    }
                }
                Tensor {
                    shape: vec![n, m],
                    data: Data::F32(v),
                }
            }
            "Add" => elementwise(&arg(0), &arg(1), |x, y| x + y),
            "Sub" => elementwise(&arg(0), &arg(1), |x, y| x - y),
            "Sigmoid" => {
                let a = arg(0);
                let v = a.f32().iter().map(|&z| 1.0 / (1.0 + (-z).exp())).collect();
                Tensor {
                    shape: a.shape,
                    data: Data::F32(v),
                }
            }
            "Neg" => {
                let a = arg(0);
                Tensor {
                    shape: a.shape.clone(),
                    data: Data::F32(a.f32().iter().map(|z| -z).collect()),
                }
            }
            "Concat" => {
                assert_eq!(attr_i(node, "axis"), Some(1));
                let (a, b) = (arg(0), arg(1));
                let n = a.shape[0];
                let (ca, cb) = (a.shape[1], b.shape[1]);
                let mut v = Vec::new();
                for r in 0..n {
                    v.extend_from_slice(&a.f32()[r * ca..(r + 1) * ca]);
                    v.extend_from_slice(&b.f32()[r * cb..(r + 1) * cb]);
                }
                Tensor {
                    shape: vec![n, ca + cb],
                    data: Data::F32(v),
                }
            }
            "Softmax" => {
                assert_eq!(attr_i(node, "axis"), Some(-1));
                let a = arg(0);
                let cols = a.shape[1];
                let mut v = Vec::new();
                for row in a.f32().chunks(cols) {
                    let max = row.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
                    let e: Vec<f32> = row.iter().map(|x| (x - max).exp()).collect();
                    let s: f32 = e.iter().sum();
                    v.extend(e.iter().map(|x| x / s));
                }
                Tensor {
                    shape: a.shape,
                    data: Data::F32(v),
                }
            }
            "ArgMax" => {
                assert_eq!(
                    (attr_i(node, "axis"), attr_i(node, "keepdims")),
                    (Some(1), Some(0))
                );
                let a = arg(0);
                let cols = a.shape[1];
                let v = a
                    .f32()
                    .chunks(cols)
                    .map(|row| {
                        // First index of the maximum (select_last_index = 0).
                        let mut best = 0;
                        for (i, &x) in row.iter().enumerate() {
                            if x > row[best] {
                                best = i;
                            }
                        }
                        best as i64
                    })
                    .collect();
                Tensor {
                    shape: vec![a.shape[0]],
                    data: Data::I64(v),
                }
            }
            "Gather" => {
                assert_eq!(attr_i(node, "axis"), Some(0));
                let (data, idx) = (arg(0), arg(1));
                let (Data::I64(d), Data::I64(i)) = (&data.data, &idx.data) else {
                    panic!()
                };
                let v = i.iter().map(|&k| d[k as usize]).collect();
                Tensor {
                    shape: idx.shape.clone(),
                    data: Data::I64(v),
                }
            }
            op => panic!("operator {op} not expected"),
        };
        env.insert(node.output[0].clone(), out);
    }
    env
}

fn rows() -> (Vec<f32>, usize) {
    let x = vec![
        0.5, -1.0, 2.0, //
        0.0, 0.0, 0.0, //
        -3.0, 1.5, 0.25, //
        10.0, -7.0, 1.0,
    ];
    (x, 4)
}

fn op_types(model: &ModelProto) -> Vec<&str> {
    model
        .graph
        .as_ref()
        .unwrap()
        .node
        .iter()
        .map(|n| n.op_type.as_deref().unwrap())
        .collect()
}

fn check_header(model: &ModelProto) {
    assert_eq!(model.ir_version, Some(IR_VERSION));
    assert_eq!(model.producer_name.as_deref(), Some("safetensors-node"));
    assert_eq!(model.opset_import.len(), 1);
    assert_eq!(model.opset_import[0].domain.as_deref(), Some(""));
    assert_eq!(model.opset_import[0].version, Some(OPSET_VERSION));
    let graph = model.graph.as_ref().unwrap();
    let input = &graph.input[0];
    assert_eq!(input.name.as_deref(), Some("input"));
    let Some(TypeProtoValue::TensorType(t)) = &input.r#type.as_ref().unwrap().value else {
        panic!()
    };
    assert_eq!(t.elem_type, Some(data_type::FLOAT));
    let dims = &t.shape.as_ref().unwrap().dim;
    assert_eq!(dims[0].value, Some(DimensionValue::DimParam("N".into())));
    assert_eq!(dims[1].value, Some(DimensionValue::DimValue(3)));
}

#[test]
fn linear_regression_structure_and_math() {
    let coef = [0.5f32, -2.0, 1.25];
    let bytes = linear_regression_model(&coef, 0.75).unwrap();
    let model = decode_model(&bytes).unwrap();
    assert_eq!(
        model.encode_to_vec(),
        bytes,
        "decode then encode gives the same bytes"
    );
    check_header(&model);
    assert_eq!(op_types(&model), ["MatMul", "Add"]);
    let graph = model.graph.as_ref().unwrap();
    assert_eq!(graph.initializer[0].dims, vec![3, 1]);
    assert_eq!(graph.initializer[1].dims, vec![1]);
    assert_eq!(graph.output[0].name.as_deref(), Some("variable"));

    let (x, n) = rows();
    let env = run(
        graph,
        Tensor {
            shape: vec![n, 3],
            data: Data::F32(x.clone()),
        },
    );
    let y = &env["variable"];
    assert_eq!(y.shape, vec![n, 1]);
    for (r, row) in x.chunks(3).enumerate() {
        let want: f32 = row.iter().zip(&coef).map(|(a, b)| a * b).sum::<f32>() + 0.75;
        assert!((y.f32()[r] - want).abs() <= 1e-6 * want.abs().max(1.0));
    }
}

#[test]
fn binary_logistic_regression_structure_and_math() {
    let coef = [0.5f32, -2.0, 1.25];
    let classes = [3, 7];
    let bytes = logistic_regression_model(&coef, &[-0.25], 2, 3, &classes).unwrap();
    let model = decode_model(&bytes).unwrap();
    assert_eq!(model.encode_to_vec(), bytes);
    check_header(&model);
    assert_eq!(
        op_types(&model),
        ["MatMul", "Add", "Sigmoid", "Sub", "Concat", "Neg", "Concat", "ArgMax", "Gather"]
    );
    let graph = model.graph.as_ref().unwrap();
    let outputs: Vec<_> = graph
        .output
        .iter()
        .map(|o| o.name.as_deref().unwrap())
        .collect();
    assert_eq!(outputs, ["label", "probabilities"]);

    // The second row has z = -0.25 < 0; add a row with z exactly 0 for the tie rule.
    let (mut x, mut n) = rows();
    x.extend([0.5, 0.0, 0.0]);
    n += 1;
    let env = run(
        graph,
        Tensor {
            shape: vec![n, 3],
            data: Data::F32(x.clone()),
        },
    );
    let probabilities = &env["probabilities"];
    assert_eq!(probabilities.shape, vec![n, 2]);
    let Data::I64(labels) = &env["label"].data else {
        panic!()
    };
    for (r, row) in x.chunks(3).enumerate() {
        let z: f32 = row.iter().zip(&coef).map(|(a, b)| a * b).sum::<f32>() - 0.25;
        let p = 1.0 / (1.0 + (-z).exp());
        assert!((probabilities.f32()[2 * r + 1] - p).abs() <= 1e-6);
        assert!((probabilities.f32()[2 * r] - (1.0 - p)).abs() <= 1e-6);
        assert_eq!(labels[r], if z > 0.0 { 7 } else { 3 }, "row {r}, z = {z}");
    }
    assert_eq!(
        labels[n - 1],
        3,
        "z = 0 predicts the first class, as scikit-learn does"
    );
}

#[test]
fn multiclass_logistic_regression_structure_and_math() {
    // coef_ layout [classes, features].
    let coef = [
        0.5f32, -2.0, 1.25, //
        -1.0, 0.0, 0.5, //
        0.25, 1.0, -0.75, //
        0.0, 0.0, 0.0,
    ];
    let intercepts = [0.1f32, -0.2, 0.3, 0.0];
    let classes = [10, 20, 30, 40];
    let bytes = logistic_regression_model(&coef, &intercepts, 4, 3, &classes).unwrap();
    let model = decode_model(&bytes).unwrap();
    check_header(&model);
    assert_eq!(
        op_types(&model),
        ["MatMul", "Add", "Softmax", "ArgMax", "Gather"]
    );
    let graph = model.graph.as_ref().unwrap();
    assert_eq!(
        graph.initializer[0].dims,
        vec![3, 4],
        "weights transposed to [features, classes]"
    );
    assert_eq!(graph.initializer[1].dims, vec![4]);
    assert_eq!(graph.initializer[2].int64_data, vec![10, 20, 30, 40]);

    let (x, n) = rows();
    let env = run(
        graph,
        Tensor {
            shape: vec![n, 3],
            data: Data::F32(x.clone()),
        },
    );
    let probabilities = &env["probabilities"];
    let Data::I64(labels) = &env["label"].data else {
        panic!()
    };
    for (r, row) in x.chunks(3).enumerate() {
        let logits: Vec<f32> = (0..4)
            .map(|c| (0..3).map(|f| row[f] * coef[c * 3 + f]).sum::<f32>() + intercepts[c])
            .collect();
        let max = logits.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
        let e: Vec<f32> = logits.iter().map(|l| (l - max).exp()).collect();
        let s: f32 = e.iter().sum();
        for (c, ec) in e.iter().enumerate() {
            assert!((probabilities.f32()[r * 4 + c] - ec / s).abs() <= 1e-6);
        }
        let best = (0..4).fold(0, |b, c| if logits[c] > logits[b] { c } else { b });
        assert_eq!(labels[r], classes[best] as i64);
    }
}

#[test]
fn attributes_with_zero_values_are_still_present() {
    // Gather's axis = 0 must be written: the ONNX checker wants exactly one value field.
    let bytes = logistic_regression_model(&[1.0], &[0.0], 2, 1, &[0, 1]).unwrap();
    let model = decode_model(&bytes).unwrap();
    let gather = model
        .graph
        .unwrap()
        .node
        .into_iter()
        .find(|n| n.op_type.as_deref() == Some("Gather"))
        .unwrap();
    assert_eq!(gather.attribute[0].i, Some(0));
}

#[test]
fn bad_arguments_are_rejected() {
    let code = |r: stcore::Result<Vec<u8>>| r.unwrap_err().code();
    assert_eq!(
        code(linear_regression_model(&[], 0.0)),
        "ERR_INVALID_ARGUMENT"
    );
    assert_eq!(
        code(linear_regression_model(&[f32::NAN], 0.0)),
        "ERR_INVALID_ARGUMENT"
    );
    assert_eq!(
        code(logistic_regression_model(&[1.0], &[0.0], 1, 1, &[0])),
        "ERR_INVALID_ARGUMENT"
    );
    assert_eq!(
        code(logistic_regression_model(
            &[1.0, 2.0],
            &[0.0],
            2,
            1,
            &[0, 1]
        )),
        "ERR_INVALID_ARGUMENT"
    );
    assert_eq!(
        code(logistic_regression_model(
            &[1.0; 3],
            &[0.0; 3],
            3,
            1,
            &[0, 1]
        )),
        "ERR_INVALID_ARGUMENT"
    );
    assert_eq!(
        code(logistic_regression_model(
            &[1.0],
            &[0.0],
            2,
            usize::MAX,
            &[0, 1]
        )),
        "ERR_INVALID_ARGUMENT"
    );
    assert_eq!(
        decode_model(b"\xff\xff\xff").unwrap_err().code(),
        "ERR_INVALID_MODEL"
    );
}
