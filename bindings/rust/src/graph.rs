//! A streaming structural key for any IR: the runtime walks its own graph
//! once, adding each node (op, attributes, input references, output types),
//! then finishes.  The builder copies what it is given into arenas it keeps
//! across graphs, so once warm it allocates nothing, per node or per graph;
//! the key is [`crate::graph_key`]'s for the same nodes (one
//! `ccache_fp_graph` call at the finish).

use crate::ffi;
use crate::fingerprint::{Op, Ref};
use crate::status::{check, Status};
use crate::{Key, StrongKey};
use std::os::raw::c_char;
use std::ptr;

/// Where one node's parts are in the arenas.
#[derive(Clone, Copy)]
struct NodeRec {
    name: Option<usize>,
    op_id: u64,
    attrs: (usize, usize),
    outputs: (usize, usize),
    operands: (usize, usize),
    constant: Option<(usize, usize)>,
    param: i64,
}

/// One output slot: dtype, rank, where its dims start.
#[derive(Clone, Copy)]
struct TensorRec {
    dtype: i32,
    rank: u32,
    dims: usize,
}

/// The streaming graph-key builder.
///
/// ```
/// use ccache::{graph_key, GraphKeyBuilder, Node, Op, Ref, TensorType};
/// let mut g = GraphKeyBuilder::new();
/// let x = g.node(Op::Name("param"), &[], &[], &[TensorType { dtype: 1, dims: &[4] }]);
/// g.set_param(0);
/// let y = g.node(Op::Name("relu"), &[], &[Ref { node: x, slot: 0 }], &[TensorType { dtype: 1, dims: &[4] }]);
/// let key = g.finish(&[Ref { node: y, slot: 0 }], "cpu").unwrap();
///
/// // The same key as graph_key on the same nodes:
/// let t = [TensorType { dtype: 1, dims: &[4] }];
/// let nodes = [
///     Node { op: Op::Name("param"), attrs: &[], outputs: &t, operands: &[], constant: None, param: Some(0) },
///     Node { op: Op::Name("relu"), attrs: &[], outputs: &t, operands: &[Ref { node: 0, slot: 0 }], constant: None, param: None },
/// ];
/// assert_eq!(key, graph_key(&nodes, &[Ref { node: 1, slot: 0 }], "cpu").unwrap());
/// ```
///
/// Attributes may also be appended one by one after the node is begun
/// ([`GraphKeyBuilder::attr_u64`] and the others: each framed with a type
/// tag, so the bytes of different attribute lists never collide), so a
/// runtime need not serialise them first.  A bad node (a NUL in an op name,
/// a rank over 16, a constant or a parameter set twice) makes the finish
/// `EINVAL`; so do a forward reference or no outputs.  One builder per
/// thread; reuse it (it resets at each finish, keeping its arenas).
#[derive(Default)]
pub struct GraphKeyBuilder {
    nodes: Vec<NodeRec>,
    tensors: Vec<TensorRec>,
    dims: Vec<i64>,
    operands: Vec<ffi::ccache_fp_ref>,
    names: Vec<u8>,
    attrs: Vec<u8>,
    constants: Vec<u8>,
    text: Vec<u8>,
    raw_nodes: Vec<ffi::ccache_fp_node>,
    raw_tensors: Vec<ffi::ccache_fp_tensor>,
    scratch: Vec<ffi::ccache_key>,
    strong_scratch: Vec<ffi::ccache_strong_key>,
    bad: bool,
}

/// `CCACHE_FP_MAX_RANK`.
const MAX_RANK: usize = 16;
const TAG_U64: u8 = 1;
const TAG_I64: u8 = 2;
const TAG_F64: u8 = 3;
const TAG_BYTES: u8 = 4;
const TAG_STR: u8 = 5;

impl GraphKeyBuilder {
    /// An empty builder (its arenas grow on first use and are kept).
    pub fn new() -> GraphKeyBuilder {
        GraphKeyBuilder::default()
    }

    /// Nodes added since the last finish.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether no node was added since the last finish.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Adds a node and returns its index (for the [`Ref`]s of later nodes and
    /// of the outputs).  `attrs` are the runtime's serialised attribute
    /// bytes (more may follow with the `attr_*` calls); `inputs` name
    /// earlier nodes' output slots; `outputs` are this node's output types.
    #[inline]
    pub fn node(&mut self, op: Op<'_>, attrs: &[u8], inputs: &[Ref], outputs: &[crate::TensorType<'_>]) -> u32 {
        let id = self.begin(op);
        self.cur().attrs.1 = attrs.len();
        self.attrs.extend_from_slice(attrs);
        for r in inputs {
            self.input(*r);
        }
        for t in outputs {
            self.output(t.dtype, t.dims);
        }
        id
    }

    /// Begins a node with no attributes, inputs or outputs yet: the calls
    /// that follow add them to it, until the next `begin`/`node`.
    #[inline]
    pub fn begin(&mut self, op: Op<'_>) -> u32 {
        let name = match op {
            Op::Name(s) => {
                if s.as_bytes().contains(&0) {
                    self.bad = true;
                }
                let at = self.names.len();
                self.names.extend_from_slice(s.as_bytes());
                self.names.push(0);
                Some(at)
            }
            Op::Id(_) => None,
        };
        let (a, t, o) = (self.attrs.len(), self.tensors.len(), self.operands.len());
        self.nodes.push(NodeRec {
            name,
            op_id: if let Op::Id(id) = op { id } else { 0 },
            attrs: (a, 0),
            outputs: (t, 0),
            operands: (o, 0),
            constant: None,
            param: -1,
        });
        (self.nodes.len() - 1) as u32
    }

    #[inline]
    fn cur(&mut self) -> &mut NodeRec {
        if self.nodes.is_empty() {
            // An append before any node: a caller bug, reported at the finish.
            self.bad = true;
            self.begin(Op::Id(0));
        }
        self.nodes.last_mut().expect("a node")
    }

    /// Adds an input of the current node: output slot `r.slot` of node `r.node`.
    #[inline]
    pub fn input(&mut self, r: Ref) -> &mut Self {
        self.cur().operands.1 += 1;
        self.operands.push(ffi::ccache_fp_ref { node: r.node, slot: r.slot });
        self
    }

    /// Adds an output slot of the current node: a dtype code and dims (rank at most 16).
    #[inline]
    pub fn output(&mut self, dtype: i32, dims: &[i64]) -> &mut Self {
        if dims.len() > MAX_RANK {
            self.bad = true;
        }
        self.cur().outputs.1 += 1;
        self.tensors.push(TensorRec { dtype, rank: dims.len() as u32, dims: self.dims.len() });
        self.dims.extend_from_slice(dims);
        self
    }

    /// Marks the current node as graph input number `index`.
    #[inline]
    pub fn set_param(&mut self, index: u32) -> &mut Self {
        let n = self.cur();
        if n.param >= 0 {
            self.bad = true;
        }
        self.cur().param = index as i64;
        self
    }

    /// Gives the current node constant bytes (weights baked in).
    #[inline]
    pub fn set_constant(&mut self, bytes: &[u8]) -> &mut Self {
        let at = self.constants.len();
        self.constants.extend_from_slice(bytes);
        let n = self.cur();
        if n.constant.is_some() {
            self.bad = true;
        }
        self.cur().constant = Some((at, bytes.len()));
        self
    }

    #[inline]
    fn attr_raw(&mut self, tag: u8, v: &[u8]) -> &mut Self {
        self.cur().attrs.1 += 1 + v.len();
        self.attrs.push(tag);
        self.attrs.extend_from_slice(v);
        self
    }

    /// Appends an unsigned integer attribute to the current node (tagged, 8 bytes LE).
    #[inline]
    pub fn attr_u64(&mut self, v: u64) -> &mut Self {
        self.attr_raw(TAG_U64, &v.to_le_bytes())
    }
    /// Appends a signed integer attribute (its own tag).
    #[inline]
    pub fn attr_i64(&mut self, v: i64) -> &mut Self {
        self.attr_raw(TAG_I64, &v.to_le_bytes())
    }
    /// Appends a double attribute by its bit pattern.
    #[inline]
    pub fn attr_f64(&mut self, v: f64) -> &mut Self {
        self.attr_raw(TAG_F64, &v.to_bits().to_le_bytes())
    }
    /// Appends a byte-string attribute (tag, 8-byte length, bytes).
    #[inline]
    pub fn attr_bytes(&mut self, b: &[u8]) -> &mut Self {
        self.attr_raw(TAG_BYTES, &(b.len() as u64).to_le_bytes());
        self.cur().attrs.1 += b.len();
        self.attrs.extend_from_slice(b);
        self
    }
    /// Appends a string attribute (tagged apart from bytes).
    #[inline]
    pub fn attr_str(&mut self, s: &str) -> &mut Self {
        self.attr_raw(TAG_STR, &(s.len() as u64).to_le_bytes());
        self.cur().attrs.1 += s.len();
        self.attrs.extend_from_slice(s.as_bytes());
        self
    }

    /// Forgets the nodes added (keeps the arenas).
    pub fn reset(&mut self) {
        self.nodes.clear();
        self.tensors.clear();
        self.dims.clear();
        self.operands.clear();
        self.names.clear();
        self.attrs.clear();
        self.constants.clear();
        self.bad = false;
    }

    /// Points the C nodes into the arenas (which no longer move) and the
    /// device into `text`.  EINVAL for a bad node or a NUL in the device.
    fn lay_out(&mut self, device: &str) -> Result<(), Status> {
        if self.bad || device.as_bytes().contains(&0) {
            return Err(Status::from_code(Status::EINVAL));
        }
        self.text.clear();
        self.text.extend_from_slice(device.as_bytes());
        self.text.push(0);
        self.raw_tensors.clear();
        let dims = self.dims.as_ptr();
        self.raw_tensors.extend(self.tensors.iter().map(|t| ffi::ccache_fp_tensor {
            dtype: t.dtype,
            rank: t.rank,
            // SAFETY (of the add): within `dims`, whose last element is at t.dims + rank - 1.
            dims: if t.rank == 0 { ptr::null() } else { unsafe { dims.add(t.dims) } },
        }));
        self.raw_nodes.clear();
        let (names, attrs, consts) = (self.names.as_ptr(), self.attrs.as_ptr(), self.constants.as_ptr());
        let (tensors, operands) = (self.raw_tensors.as_ptr(), self.operands.as_ptr());
        // SAFETY (of each add): every offset was recorded within its arena.
        self.raw_nodes.extend(self.nodes.iter().map(|n| unsafe {
            ffi::ccache_fp_node {
                op_name: n.name.map_or(ptr::null(), |o| names.add(o) as *const c_char),
                op_id: n.op_id,
                attrs: if n.attrs.1 == 0 { ptr::null() } else { attrs.add(n.attrs.0).cast() },
                attrs_len: n.attrs.1,
                outputs: if n.outputs.1 == 0 { ptr::null() } else { tensors.add(n.outputs.0) },
                n_outputs: n.outputs.1 as u32,
                n_operands: n.operands.1 as u32,
                operands: if n.operands.1 == 0 { ptr::null() } else { operands.add(n.operands.0) },
                constant: n.constant.map_or(ptr::null(), |(o, _)| consts.add(o).cast()),
                constant_len: n.constant.map_or(0, |(_, l)| l),
                param_index: n.param,
            }
        }));
        Ok(())
    }

    /// The fast key of the graph whose outputs are `outputs`, on `device`
    /// ([`crate::graph_key`]'s rules); the builder is reset either way.
    /// Errors: `EINVAL` (a bad node, a forward or out-of-range reference, no
    /// outputs, a NUL in the device).
    pub fn finish(&mut self, outputs: &[Ref], device: &str) -> Result<Key, Status> {
        let r = self.lay_out(device).and_then(|()| {
            self.scratch.resize(self.raw_nodes.len().max(1), ffi::ccache_key::default());
            let mut key = ffi::ccache_key::default();
            // SAFETY: the nodes point into arenas not touched until this returns;
            // Ref and ccache_fp_ref have the same fields in the same order (repr(C) both).
            check(unsafe {
                ffi::ccache_fp_graph(
                    self.raw_nodes.as_ptr(),
                    self.raw_nodes.len(),
                    outputs.as_ptr().cast(),
                    outputs.len(),
                    self.text.as_ptr() as *const c_char,
                    self.scratch.as_mut_ptr(),
                    &mut key,
                )
            })
            .map(|()| key.into())
        });
        self.reset();
        r
    }

    /// [`GraphKeyBuilder::finish`] for a [`crate::StrongCache`]: BLAKE2b-256
    /// ([`crate::graph_key_strong`]'s key).  Also `ENOTSUP` without libsodium.
    pub fn finish_strong(&mut self, outputs: &[Ref], device: &str) -> Result<StrongKey, Status> {
        let r = self.lay_out(device).and_then(|()| {
            self.strong_scratch.resize(self.raw_nodes.len().max(1), ffi::ccache_strong_key::default());
            let mut key = ffi::ccache_strong_key::default();
            // SAFETY: as finish.
            check(unsafe {
                ffi::ccache_fp_graph_strong(
                    self.raw_nodes.as_ptr(),
                    self.raw_nodes.len(),
                    outputs.as_ptr().cast(),
                    outputs.len(),
                    self.text.as_ptr() as *const c_char,
                    self.strong_scratch.as_mut_ptr(),
                    &mut key,
                )
            })
            .map(|()| key.into())
        });
        self.reset();
        r
    }
}
