//! A blocking PostgreSQL client: tokio-postgres driven on the calling thread by a runtime of the
//! connection's own (one thread, the caller's), as the `postgres` crate does, with two ways of
//! sending more than one request in a round trip:
//!
//! - `defer` and `close_with`: batches (the `BEGIN` of a transaction with its settings, the
//!   `COMMIT` of a transaction of one statement) kept until the next request and written ahead
//!   of it and after it;
//! - `pipeline`: several statements written together and answered in order.
//!
//! A statement is unnamed unless the caller prepared it (`Sql`): its parameters declared with
//! their types (`Typed`), it is parsed, bound and run in one message sequence, so that nothing of
//! it outlives its request on the server connection. A pooler in transaction mode (PgBouncer)
//! hands a client's transactions to whichever server connection is free, where a named statement
//! prepared on another would be missing, or one of another client's name already there.
//!
//! A round trip's requests are all written before any answer is read; the server runs them in
//! order. Inside a transaction a statement failing on the server fails the ones after it
//! (SQLSTATE 25P02), and a request the client refuses before writing it (its parameters do not
//! encode) keeps the ones after it from being written at all: the statements after a failed one
//! never take effect, as when each waited for the one before.
//!
//! Every wait has a deadline: the whole connect (TCP, TLS, authentication, start-up) its
//! `Deadlines::connect`, and each round trip its `Deadlines::command`. A round trip past its
//! deadline closes the connection (the socket is dropped, with what was written and not
//! answered) and fails; `timed_out` then tells that failure from the server's or the network's.

use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::runtime::Runtime;
use tokio_postgres::tls::{MakeTlsConnect, TlsConnect};
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{AsyncMessage, Config, Error, Row, Socket, Statement};

/// A statement's parameters, each with the type it is declared to the server as (`Type`'s OID
/// 0 leaves it to the server to infer from the statement). Borrowed for the request.
pub(super) type Typed<'a> = [(&'a (dyn ToSql + Sync), Type)];

/// A statement as it is sent: its text, unnamed (parsed, bound and run at once), or by the name
/// the connection keeps it prepared under (`Client::prepare`).
#[derive(Clone, Copy)]
pub(super) enum Sql<'a> {
    Unnamed(&'a str),
    Named(&'a Statement),
}

/// The connection's next message, polled by every request while it waits (the connection does
/// the reading and writing); notices and notifications are not used and are dropped.
type Messages = Box<dyn FnMut(&mut Context<'_>) -> Poll<Option<Result<AsyncMessage, Error>>> + Send>;

/// A failure to connect: the runtime could not be made (no file descriptors left), the server
/// was not reached or refused, or the connect was not done within its deadline.
pub(super) enum ConnectError {
    Runtime(std::io::Error),
    Db(Error),
    TimedOut(Duration),
}

/// How long a connection waits for the server: the whole connect, and each round trip.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Deadlines {
    pub connect: Duration,
    pub command: Duration,
}

/// Where a round trip failed: the deferred batch (or the connection itself), the statement at
/// that position (from 0), or the closing batch. The requests after it failed too, or were never
/// sent.
pub(super) enum PipelineError {
    Before(Error),
    At(usize, Error),
    After(Error),
}

impl PipelineError {
    fn into_error(self) -> Error {
        match self {
            PipelineError::Before(e) | PipelineError::At(_, e) | PipelineError::After(e) => e,
        }
    }
}

/// One request of a round trip, answering `None` (the deferred batch) or `Some` answer.
type Request<'a, T> = Pin<Box<dyn Future<Output = Answer<T>> + 'a>>;
type Answer<T> = Result<Option<T>, Error>;

/// One connection. Owns its runtime and the connection's state; dropping it closes the socket.
pub(super) struct Client {
    runtime: Runtime,
    messages: Messages,
    inner: tokio_postgres::Client,
    /// Sent ahead of the next request (`defer`).
    deferred: Option<String>,
    /// Sent after the next request (`close_with`).
    closing: Option<&'static str>,
    /// Whether a batch of `close_with` was written since the last `defer` (see `take_closed`).
    closing_written: bool,
    /// How long a round trip may wait for its answers.
    command_timeout: Duration,
    /// Whether a round trip went past `command_timeout` (the connection is closed since).
    timed_out: bool,
}

impl Client {
    /// Connects within `deadlines.connect`, all of it: the TCP connect, the TLS request and
    /// handshake, the authentication and the server's start-up answers.
    pub(super) fn connect<T>(config: &Config, tls: T, deadlines: Deadlines) -> Result<Client, ConnectError>
    where
        T: MakeTlsConnect<Socket> + 'static + Send,
        T::TlsConnect: Send,
        T::Stream: Send,
        <T::TlsConnect as TlsConnect<Socket>>::Future: Send,
    {
        let runtime =
            tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(ConnectError::Runtime)?;
        // The timer is made inside the runtime, whose clock it needs.
        let connected = runtime.block_on(async { tokio::time::timeout(deadlines.connect, config.connect(tls)).await });
        let (inner, mut connection) = match connected {
            Ok(Ok(connected)) => connected,
            failed => {
                // Not waiting for a resolver still looking the host name up (the client's lookup
                // runs on a blocking thread, which dropping the runtime would wait for).
                runtime.shutdown_background();
                return Err(match failed {
                    Ok(Err(e)) => ConnectError::Db(e),
                    _ => ConnectError::TimedOut(deadlines.connect),
                });
            }
        };
        Ok(Client {
            runtime,
            messages: Box::new(move |cx| connection.poll_message(cx)),
            inner,
            deferred: None,
            closing_written: false,
            closing: None,
            command_timeout: deadlines.command,
            timed_out: false,
        })
    }

    /// Whether a round trip of this connection went past its deadline: the connection was
    /// closed then, and every request since failed as on a closed connection.
    pub(super) fn timed_out(&self) -> bool {
        self.timed_out
    }

    /// How long a round trip may wait.
    pub(super) fn command_timeout(&self) -> Duration {
        self.command_timeout
    }

    /// Sets how long the next round trips may wait (a journal's options may differ from the
    /// ones the connection was opened with).
    pub(super) fn set_command_timeout(&mut self, command_timeout: Duration) {
        self.command_timeout = command_timeout;
    }

    /// Keeps `batch` (statements in the simple query protocol, without parameters) to be
    /// written with the next request, ahead of it. A batch deferred before and not yet sent is
    /// sent now, on its own.
    pub(super) fn defer(&mut self, batch: String) -> Result<(), Error> {
        if let Some(earlier) = self.deferred.take() {
            self.batch_execute(&earlier)?;
        }
        self.deferred = Some(batch);
        self.closing_written = false;
        Ok(())
    }

    /// Whether the batch of `close_with` (a `COMMIT`) was written since the transaction's
    /// `defer`, after a request: then the transaction is over on the server (committed when
    /// every request before it succeeded, else rolled back), or its end unknown (the connection
    /// lost meanwhile). A closing batch kept and not written is dropped.
    pub(super) fn take_closed(&mut self) -> bool {
        self.closing = None;
        std::mem::take(&mut self.closing_written)
    }

    /// Keeps `batch` (as for `defer`) to be written with the next request, after it: a
    /// transaction of one statement, `BEGIN` deferred and `COMMIT` closing, is one round trip.
    /// The statement's failure is answered; the batch still runs (a `COMMIT` of a failed
    /// transaction rolls it back).
    pub(super) fn close_with(&mut self, batch: &'static str) {
        self.closing = Some(batch);
    }

    /// Drops the batches of `defer` and `close_with` that were not written (no request came, or
    /// one before them failed unsent), telling whether the deferred one was written and the
    /// closing one not: then the transaction the deferred one began is still open on the server,
    /// and the caller ends it.
    pub(super) fn left_open(&mut self) -> bool {
        let deferred = self.deferred.take();
        let closing = self.closing.take();
        deferred.is_none() && closing.is_some()
    }

    pub(super) fn is_closed(&self) -> bool {
        self.inner.is_closed()
    }

    pub(super) fn batch_execute(&mut self, sql: &str) -> Result<(), Error> {
        self.one(|inner| inner.batch_execute(sql))
    }

    pub(super) fn execute(&mut self, sql: Sql<'_>, params: &Typed<'_>) -> Result<u64, Error> {
        self.one(|inner| execute(inner, sql, params))
    }

    pub(super) fn query(&mut self, sql: Sql<'_>, params: &Typed<'_>) -> Result<Vec<Row>, Error> {
        self.one(|inner| query(inner, sql, params))
    }

    pub(super) fn query_one(&mut self, sql: Sql<'_>, params: &Typed<'_>) -> Result<Row, Error> {
        self.one(|inner| async move {
            match sql {
                Sql::Unnamed(sql) => inner.query_typed_one(sql, params).await,
                Sql::Named(statement) => inner.query_one(statement, &values(params)).await,
            }
        })
    }

    pub(super) fn query_opt(&mut self, sql: Sql<'_>, params: &Typed<'_>) -> Result<Option<Row>, Error> {
        self.one(|inner| async move {
            match sql {
                Sql::Unnamed(sql) => inner.query_typed_opt(sql, params).await,
                Sql::Named(statement) => inner.query_opt(statement, &values(params)).await,
            }
        })
    }

    /// `sql` prepared under a name of this connection's, its parameters of `types`: one round
    /// trip, with the deferred batch but never the closing one (the statement it closes is yet
    /// to come).
    pub(super) fn prepare(&mut self, sql: &str, types: &[Type]) -> Result<Statement, Error> {
        let mut prepared = self.prepare_all(&[(sql, types)]).map_err(PipelineError::into_error)?;
        Ok(prepared.pop().unwrap_or_else(|| unreachable!("prepare_all answers a statement for each text")))
    }

    /// Each of `statements` (text, parameter types) prepared under a name of this connection's,
    /// all in one round trip, with the deferred batch but never the closing one; a failure says
    /// where (`PipelineError::At`, the position in `statements`), and the ones after it are not
    /// prepared.
    pub(super) fn prepare_all(&mut self, statements: &[(&str, &[Type])]) -> Result<Vec<Statement>, PipelineError> {
        self.round_trip(false, |inner| {
            statements
                .iter()
                .map(|&(sql, types)| -> Request<'_, Statement> {
                    Box::pin(async move { inner.prepare_typed(sql, types).await.map(Some) })
                })
                .collect()
        })
    }

    /// `send` of the one tokio-postgres call `call` makes, its failure whichever it was.
    fn one<'a, T, F>(&'a mut self, call: impl FnOnce(&'a tokio_postgres::Client) -> F) -> Result<T, Error>
    where
        F: Future<Output = Result<T, Error>> + 'a,
    {
        self.send(|inner| {
            let answer = call(inner);
            Box::pin(async move { answer.await.map(Some) })
        })
        .map_err(PipelineError::into_error)
    }

    /// The deferred batch, when there is one, then the request `make` makes, in one round trip;
    /// the batch's failure first.
    fn send<'a, T>(
        &'a mut self,
        make: impl FnOnce(&'a tokio_postgres::Client) -> Request<'a, T>,
    ) -> Result<T, PipelineError> {
        let mut answers = self.round_trip(true, |inner| vec![make(inner)])?;
        Ok(answers.pop().unwrap_or_else(|| unreachable!("an answered request answers `Some`")))
    }

    /// Runs the deferred batch, if any, then `executed` in order (their rows, if any, dropped),
    /// then `queried`, all written at once: one round trip. Answers `queried`'s rows, or where the
    /// first failure was (a statement's position counts `queried` last).
    pub(super) fn pipeline(
        &mut self,
        executed: &[(Sql<'_>, &Typed<'_>)],
        queried: (Sql<'_>, &Typed<'_>),
    ) -> Result<Vec<Row>, PipelineError> {
        let mut answers = self.round_trip(true, |inner| {
            let executed = executed.iter().map(|&(sql, params)| -> Request<'_, Vec<Row>> {
                Box::pin(async move { execute(inner, sql, params).await.map(|_| None) })
            });
            let (sql, params) = queried;
            executed
                .chain([Box::pin(async move { query(inner, sql, params).await.map(Some) }) as Request<'_, _>])
                .collect()
        })?;
        Ok(answers.pop().unwrap_or_else(|| unreachable!("the queried statement answers `Some`")))
    }

    /// The deferred batch, when there is one, then the requests `make` makes, then (when
    /// `closes`) the closing batch, when there is one, in one round trip (see `in_order`): each
    /// request's answer, or where the first failure was (a batch's, or a request's by its position
    /// among them). A closing batch left unsent (a request before it failed unsent) is kept (see
    /// `left_open`).
    fn round_trip<'a, T>(
        &'a mut self,
        closes: bool,
        make: impl FnOnce(&'a tokio_postgres::Client) -> Vec<Request<'a, T>>,
    ) -> Result<Vec<T>, PipelineError> {
        let Client { runtime, messages, inner, deferred, closing, closing_written, command_timeout, timed_out } = self;
        let inner: &'a tokio_postgres::Client = inner;
        let batch = deferred.take().map(|batch| batch_request(inner, batch));
        let before = usize::from(batch.is_some());
        let mut requests: Vec<Request<'a, T>> = batch.into_iter().chain(make(inner)).collect();
        let after = requests.len();
        let closed = if closes { closing.take() } else { None };
        requests.extend(closed.map(|batch| batch_request(inner, batch)));
        let answers = match in_order(runtime, messages, *command_timeout, requests) {
            Ok(answers) => answers,
            Err(Waited::Failed(e)) => {
                // The connection failed: the closing batch may have been written.
                *closing_written |= closed.is_some();
                return Err(PipelineError::Before(e));
            }
            Err(Waited::TimedOut) => {
                *closing_written |= closed.is_some();
                // The connection goes (its socket closed), with whatever it had written and
                // not had answered; the requests fail as on any closed connection.
                *timed_out = true;
                *closing = None;
                *messages = Box::new(|_| Poll::Ready(None));
                let closed = runtime.block_on(inner.batch_execute(""));
                return Err(PipelineError::Before(closed.expect_err("a request on a dropped connection fails")));
            }
        };
        if closed.is_some() {
            if answers.last().is_some_and(Option::is_none) {
                *closing = closed;
            } else {
                *closing_written = true;
            }
        }
        let mut answered = Vec::with_capacity(answers.len());
        for (at, answer) in answers.into_iter().enumerate() {
            match answer {
                Some(Ok(answer)) => answered.extend(answer),
                Some(Err(e)) if at < before => return Err(PipelineError::Before(e)),
                Some(Err(e)) if at >= after => return Err(PipelineError::After(e)),
                Some(Err(e)) => return Err(PipelineError::At(at - before, e)),
                None => unreachable!("a request is left unsent only after one that failed"),
            }
        }
        Ok(answered)
    }
}

/// `sql` run with `params`, its rows dropped: the number of rows it changed.
async fn execute(inner: &tokio_postgres::Client, sql: Sql<'_>, params: &Typed<'_>) -> Result<u64, Error> {
    match sql {
        Sql::Unnamed(sql) => inner.execute_typed(sql, params).await,
        Sql::Named(statement) => inner.execute(statement, &values(params)).await,
    }
}

/// `sql` run with `params`: its rows.
async fn query(inner: &tokio_postgres::Client, sql: Sql<'_>, params: &Typed<'_>) -> Result<Vec<Row>, Error> {
    match sql {
        Sql::Unnamed(sql) => inner.query_typed(sql, params).await,
        Sql::Named(statement) => inner.query(statement, &values(params)).await,
    }
}

/// The values of `params`, for a statement prepared with their types.
fn values<'a>(params: &Typed<'a>) -> Vec<&'a (dyn ToSql + Sync)> {
    params.iter().map(|&(value, _)| value).collect()
}

/// A kept `batch` as a request of a round trip.
fn batch_request<'a, T>(inner: &'a tokio_postgres::Client, batch: impl AsRef<str> + 'a) -> Request<'a, T> {
    Box::pin(async move { inner.batch_execute(batch.as_ref()).await.map(|()| None) })
}

/// Polls `requests` in order until each is answered, driving the connection meanwhile: all are
/// written before any answer is read. A request failing at its first poll failed before
/// anything of it was written (its parameters did not encode, or the connection is closed):
/// the requests after it are never polled, so never sent. Answers each request's outcome,
/// `None` for one never sent; a failure of the connection itself ends the wait with it.
fn in_order<T>(
    runtime: &mut Runtime,
    messages: &mut Messages,
    deadline: Duration,
    mut requests: Vec<Request<'_, T>>,
) -> Result<Vec<Option<Answer<T>>>, Waited> {
    let mut answers: Vec<Option<Answer<T>>> = requests.iter().map(|_| None).collect();
    let mut polled = vec![false; requests.len()];
    let mut sent = requests.len();
    block_on(runtime, messages, deadline, |cx| {
        let mut waiting = false;
        for at in 0..sent {
            if answers[at].is_some() {
                continue;
            }
            let first = !std::mem::replace(&mut polled[at], true);
            match requests[at].as_mut().poll(cx) {
                Poll::Ready(answer) => {
                    let unsent = first && answer.is_err();
                    answers[at] = Some(answer);
                    if unsent {
                        sent = at + 1;
                        break;
                    }
                }
                Poll::Pending => waiting = true,
            }
        }
        if waiting { Poll::Pending } else { Poll::Ready(()) }
    })?;
    Ok(answers)
}

/// Why a wait ended without its answers.
enum Waited {
    /// The connection itself failed (the socket).
    Failed(Error),
    /// Not answered within the deadline.
    TimedOut,
}

/// Polls `work` until it is ready, driving the connection meanwhile, for at most `deadline`; a
/// failure of the connection itself (the socket) ends the wait with that failure.
fn block_on<T>(
    runtime: &mut Runtime,
    messages: &mut Messages,
    deadline: Duration,
    mut work: impl FnMut(&mut Context<'_>) -> Poll<T>,
) -> Result<T, Waited> {
    let waiting = poll_fn(|cx| {
        loop {
            match messages(cx) {
                Poll::Ready(Some(Ok(_))) => {}
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Err(Waited::Failed(e))),
                Poll::Ready(None) | Poll::Pending => break,
            }
        }
        work(cx).map(Ok)
    });
    // The timer is made inside the runtime, whose clock it needs.
    runtime.block_on(async { tokio::time::timeout(deadline, waiting).await }).unwrap_or(Err(Waited::TimedOut))
}
