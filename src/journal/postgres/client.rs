//! A blocking PostgreSQL client: tokio-postgres driven on the calling thread by a runtime of the
//! connection's own (one thread, the caller's), as the `postgres` crate does, with two ways of
//! sending more than one request in a round trip:
//!
//! - `defer`: a batch (the `BEGIN` of a transaction) kept until the next request and written
//!   with it; its failure is that request's failure;
//! - `pipeline`: several prepared statements written together and answered in order.
//!
//! A request's messages are all written before any answer is read; the server runs them in
//! order. Inside a transaction a failed statement fails the rest (SQLSTATE 25P02) and the
//! transaction commits nothing, so sending them together changes what a round trip costs, never
//! what the transaction does.

use std::future::{Future, poll_fn};
use std::pin::pin;
use std::task::{Context, Poll};

use tokio::runtime::Runtime;
use tokio_postgres::tls::{MakeTlsConnect, TlsConnect};
use tokio_postgres::types::ToSql;
use tokio_postgres::{AsyncMessage, Config, Error, Row, Socket, Statement, ToStatement};

pub(super) type Params<'a> = &'a [&'a (dyn ToSql + Sync)];

/// The connection's next message, polled by every request while it waits (the connection does
/// the reading and writing); notices and notifications are not used and are dropped.
type Messages = Box<dyn FnMut(&mut Context<'_>) -> Poll<Option<Result<AsyncMessage, Error>>> + Send>;

/// A failure to connect: the runtime could not be made (no file descriptors left), or the
/// server was not reached or refused.
pub(super) enum ConnectError {
    Runtime(std::io::Error),
    Db(Error),
}

/// Where a pipeline failed: the deferred batch (or the connection itself), or the statement at
/// that position. Inside a transaction, the statements after it failed too and are not reported.
pub(super) enum PipelineError {
    Before(Error),
    At(usize, Error),
}

/// One connection. Owns its runtime and the connection's state; dropping it closes the socket.
pub(super) struct Client {
    runtime: Runtime,
    messages: Messages,
    inner: tokio_postgres::Client,
    /// Sent with the next request (`defer`).
    deferred: Option<&'static str>,
}

impl Client {
    pub(super) fn connect<T>(config: &Config, tls: T) -> Result<Client, ConnectError>
    where
        T: MakeTlsConnect<Socket> + 'static + Send,
        T::TlsConnect: Send,
        T::Stream: Send,
        <T::TlsConnect as TlsConnect<Socket>>::Future: Send,
    {
        let runtime =
            tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(ConnectError::Runtime)?;
        let (inner, mut connection) = runtime.block_on(config.connect(tls)).map_err(ConnectError::Db)?;
        Ok(Client { runtime, messages: Box::new(move |cx| connection.poll_message(cx)), inner, deferred: None })
    }

    /// Keeps `batch` (statements in the simple query protocol, without parameters) to be
    /// written with the next request, ahead of it. A batch deferred before and not yet sent is
    /// sent now, on its own.
    pub(super) fn defer(&mut self, batch: &'static str) -> Result<(), Error> {
        if let Some(earlier) = self.deferred.take() {
            self.batch_execute(earlier)?;
        }
        self.deferred = Some(batch);
        Ok(())
    }

    pub(super) fn is_closed(&self) -> bool {
        self.inner.is_closed()
    }

    pub(super) fn prepare(&mut self, sql: &str) -> Result<Statement, Error> {
        let Client { runtime, messages, inner, deferred } = self;
        drive(runtime, messages, deferred.take().map(|batch| inner.batch_execute(batch)), inner.prepare(sql))
    }

    pub(super) fn batch_execute(&mut self, sql: &str) -> Result<(), Error> {
        let Client { runtime, messages, inner, deferred } = self;
        drive(runtime, messages, deferred.take().map(|batch| inner.batch_execute(batch)), inner.batch_execute(sql))
    }

    pub(super) fn execute<S: ?Sized + ToStatement>(&mut self, statement: &S, params: Params<'_>) -> Result<u64, Error> {
        let Client { runtime, messages, inner, deferred } = self;
        drive(
            runtime,
            messages,
            deferred.take().map(|batch| inner.batch_execute(batch)),
            inner.execute(statement, params),
        )
    }

    pub(super) fn query<S: ?Sized + ToStatement>(
        &mut self,
        statement: &S,
        params: Params<'_>,
    ) -> Result<Vec<Row>, Error> {
        let Client { runtime, messages, inner, deferred } = self;
        drive(
            runtime,
            messages,
            deferred.take().map(|batch| inner.batch_execute(batch)),
            inner.query(statement, params),
        )
    }

    pub(super) fn query_one<S: ?Sized + ToStatement>(
        &mut self,
        statement: &S,
        params: Params<'_>,
    ) -> Result<Row, Error> {
        let Client { runtime, messages, inner, deferred } = self;
        let one = inner.query_one(statement, params);
        drive(runtime, messages, deferred.take().map(|batch| inner.batch_execute(batch)), one)
    }

    pub(super) fn query_opt<S: ?Sized + ToStatement>(
        &mut self,
        statement: &S,
        params: Params<'_>,
    ) -> Result<Option<Row>, Error> {
        let Client { runtime, messages, inner, deferred } = self;
        let opt = inner.query_opt(statement, params);
        drive(runtime, messages, deferred.take().map(|batch| inner.batch_execute(batch)), opt)
    }

    /// Runs the deferred batch, if any, then `statements` in order, all written at once: one
    /// round trip. Answers each statement's rows, or where the first failure was.
    pub(super) fn pipeline(&mut self, statements: &[(&Statement, Params<'_>)]) -> Result<Vec<Vec<Row>>, PipelineError> {
        let Client { runtime, messages, inner, deferred } = self;
        let mut batch = deferred.take().map(|batch| Box::pin(inner.batch_execute(batch)));
        let mut before: Option<Result<(), Error>> = None;
        let mut requests: Vec<_> =
            statements.iter().map(|(statement, params)| Box::pin(inner.query(*statement, params))).collect();
        let mut answers: Vec<Option<Result<Vec<Row>, Error>>> = statements.iter().map(|_| None).collect();
        block_on(runtime, messages, |cx| {
            if let Some(pending) = batch.as_mut() {
                if let Poll::Ready(done) = pending.as_mut().poll(cx) {
                    before = Some(done);
                    batch = None;
                }
            }
            let mut waiting = batch.is_some();
            for (request, answer) in requests.iter_mut().zip(answers.iter_mut()) {
                if answer.is_none() {
                    match request.as_mut().poll(cx) {
                        Poll::Ready(done) => *answer = Some(done),
                        Poll::Pending => waiting = true,
                    }
                }
            }
            if waiting { Poll::Pending } else { Poll::Ready(()) }
        })
        .map_err(PipelineError::Before)?;
        if let Some(Err(e)) = before {
            return Err(PipelineError::Before(e));
        }
        let mut rows = Vec::with_capacity(answers.len());
        for (at, answer) in answers.into_iter().enumerate() {
            match answer {
                Some(Ok(answer)) => rows.push(answer),
                Some(Err(e)) => return Err(PipelineError::At(at, e)),
                None => unreachable!("every request is answered before block_on returns"),
            }
        }
        Ok(rows)
    }
}

/// Sends `batch`, when there is one, then `request`, in one round trip; the batch's failure
/// first.
fn drive<T>(
    runtime: &mut Runtime,
    messages: &mut Messages,
    batch: Option<impl Future<Output = Result<(), Error>>>,
    request: impl Future<Output = Result<T, Error>>,
) -> Result<T, Error> {
    let mut batch = batch.map(Box::pin);
    let mut before: Option<Result<(), Error>> = None;
    let mut request = pin!(request);
    let mut answer: Option<Result<T, Error>> = None;
    block_on(runtime, messages, |cx| {
        if let Some(pending) = batch.as_mut() {
            if let Poll::Ready(done) = pending.as_mut().poll(cx) {
                before = Some(done);
                batch = None;
            }
        }
        if answer.is_none() {
            if let Poll::Ready(done) = request.as_mut().poll(cx) {
                answer = Some(done);
            }
        }
        if batch.is_none() && answer.is_some() { Poll::Ready(()) } else { Poll::Pending }
    })?;
    if let Some(Err(e)) = before {
        return Err(e);
    }
    answer.unwrap_or_else(|| unreachable!("the request is answered before block_on returns"))
}

/// Polls `work` until it is ready, driving the connection meanwhile; a failure of the
/// connection itself (the socket) ends the wait with that failure.
fn block_on<T>(
    runtime: &mut Runtime,
    messages: &mut Messages,
    mut work: impl FnMut(&mut Context<'_>) -> Poll<T>,
) -> Result<T, Error> {
    runtime.block_on(poll_fn(|cx| {
        loop {
            match messages(cx) {
                Poll::Ready(Some(Ok(_))) => {}
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Err(e)),
                Poll::Ready(None) | Poll::Pending => break,
            }
        }
        work(cx).map(Ok)
    }))
}
