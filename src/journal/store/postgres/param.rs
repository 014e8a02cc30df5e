//! The parameters of the journal's own statements, each declared to the server as the type of
//! its Rust value: `i64` as `int8`, text as `text`, bytes as `bytea`, `bool` as `bool`, a list of
//! `i64` as `int8[]`, an `Option` as its value's. The client sends statements with their
//! parameters' types (`client::Typed`; unnamed, or prepared with them by `statement_cache`)
//! instead of asking the server which types it infers; these are the types it inferred for every
//! parameter of the journal's statements
//! (their columns are `bigint`, `text` and `bytea`, and the rest cast: `$4::bigint`).

use tokio_postgres::types::{ToSql, Type};

/// A Rust type the journal binds, with the type it is declared as.
pub(super) trait Declared {
    const TYPE: Type;
}

impl Declared for i64 {
    const TYPE: Type = Type::INT8;
}

impl Declared for bool {
    const TYPE: Type = Type::BOOL;
}

impl Declared for &str {
    const TYPE: Type = Type::TEXT;
}

impl Declared for String {
    const TYPE: Type = Type::TEXT;
}

impl Declared for &[u8] {
    const TYPE: Type = Type::BYTEA;
}

impl Declared for Vec<i64> {
    const TYPE: Type = Type::INT8_ARRAY;
}

/// NULL is sent as a value of the type it stands for.
impl<T: Declared> Declared for Option<T> {
    const TYPE: Type = T::TYPE;
}

/// A parameter of one of the journal's statements: its value and its declared type.
pub(super) trait Param: Sync {
    fn value(&self) -> &(dyn ToSql + Sync);
    fn declared(&self) -> Type;
}

impl<T: Declared + ToSql + Sync> Param for T {
    fn value(&self) -> &(dyn ToSql + Sync) {
        self
    }

    fn declared(&self) -> Type {
        T::TYPE
    }
}

/// A statement's parameters, borrowed for the call.
pub(super) type Params<'a> = &'a [&'a dyn Param];

/// `params` as the client sends them (`client::Typed`): each value with its declared type.
pub(super) fn typed<'a>(params: Params<'a>) -> Vec<(&'a (dyn ToSql + Sync), Type)> {
    params.iter().map(|param| (param.value(), param.declared())).collect()
}
