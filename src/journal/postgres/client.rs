//! A blocking PostgreSQL client: tokio-postgres driven on the calling thread by a runtime of the
//! connection's own (one thread, the caller's), as the `postgres` crate does, with two ways of
//! sending more than one request in a round trip:
//!
//! - `defer`: a batch (the `BEGIN` of a transaction) kept until the next request and written
//!   with it; its failure is that request's failure;
//! - `pipeline`: several prepared statements written together and answered in order.
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
use tokio_postgres::types::ToSql;
use tokio_postgres::{AsyncMessage, Config, Error, Row, Socket, Statement, ToStatement};

pub(super) type Params<'a> = &'a [&'a (dyn ToSql + Sync)];

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

/// Where a round trip failed: the deferred batch (or the connection itself), or the statement at
/// that position (from 0). The statements after it failed too, or were never sent.
pub(super) enum PipelineError {
    Before(Error),
    At(usize, Error),
}

impl PipelineError {
    fn into_error(self) -> Error {
        match self {
            PipelineError::Before(e) | PipelineError::At(_, e) => e,
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
    /// Sent with the next request (`defer`).
    deferred: Option<&'static str>,
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
        let (inner, mut connection) = runtime
            .block_on(async { tokio::time::timeout(deadlines.connect, config.connect(tls)).await })
            .map_err(|_| ConnectError::TimedOut(deadlines.connect))?
            .map_err(ConnectError::Db)?;
        Ok(Client {
            runtime,
            messages: Box::new(move |cx| connection.poll_message(cx)),
            inner,
            deferred: None,
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
        self.prepare_apart(sql).map_err(PipelineError::into_error)
    }

    /// `prepare`, telling the deferred batch's failure (`Before`: the transaction's, such as its
    /// lock wait timing out) from the statement's own (`At(0)`).
    pub(super) fn prepare_apart(&mut self, sql: &str) -> Result<Statement, PipelineError> {
        self.send(|inner| Box::pin(async move { inner.prepare(sql).await.map(Some) }))
    }

    pub(super) fn batch_execute(&mut self, sql: &str) -> Result<(), Error> {
        self.one(|inner| inner.batch_execute(sql))
    }

    pub(super) fn execute<S: ?Sized + ToStatement>(&mut self, statement: &S, params: Params<'_>) -> Result<u64, Error> {
        self.one(|inner| inner.execute(statement, params))
    }

    pub(super) fn query<S: ?Sized + ToStatement>(
        &mut self,
        statement: &S,
        params: Params<'_>,
    ) -> Result<Vec<Row>, Error> {
        self.one(|inner| inner.query(statement, params))
    }

    pub(super) fn query_one<S: ?Sized + ToStatement>(
        &mut self,
        statement: &S,
        params: Params<'_>,
    ) -> Result<Row, Error> {
        self.one(|inner| inner.query_one(statement, params))
    }

    pub(super) fn query_opt<S: ?Sized + ToStatement>(
        &mut self,
        statement: &S,
        params: Params<'_>,
    ) -> Result<Option<Row>, Error> {
        self.one(|inner| inner.query_opt(statement, params))
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
        let mut answers = self.round_trip(|inner| vec![make(inner)])?;
        Ok(answers.pop().unwrap_or_else(|| unreachable!("an answered request answers `Some`")))
    }

    /// Runs the deferred batch, if any, then `statements` in order, all written at once: one
    /// round trip. Answers each statement's rows, or where the first failure was.
    pub(super) fn pipeline(&mut self, statements: &[(&Statement, Params<'_>)]) -> Result<Vec<Vec<Row>>, PipelineError> {
        self.round_trip(|inner| {
            statements
                .iter()
                .map(|&(statement, params)| -> Request<'_, Vec<Row>> {
                    Box::pin(async move { inner.query(statement, params).await.map(Some) })
                })
                .collect()
        })
    }

    /// The deferred batch, when there is one, then the requests `make` makes, in one round trip
    /// (see `in_order`): each request's answer, or where the first failure was (the batch's,
    /// or a request's by its position among them).
    fn round_trip<'a, T>(
        &'a mut self,
        make: impl FnOnce(&'a tokio_postgres::Client) -> Vec<Request<'a, T>>,
    ) -> Result<Vec<T>, PipelineError> {
        let Client { runtime, messages, inner, deferred, command_timeout, timed_out } = self;
        let inner: &'a tokio_postgres::Client = inner;
        let batch = deferred.take().map(|batch| batch_request(inner, batch));
        let before = usize::from(batch.is_some());
        let requests: Vec<Request<'a, T>> = batch.into_iter().chain(make(inner)).collect();
        let answers = match in_order(runtime, messages, *command_timeout, requests) {
            Ok(answers) => answers,
            Err(Waited::Failed(e)) => return Err(PipelineError::Before(e)),
            Err(Waited::TimedOut) => {
                // The connection goes (its socket closed), with whatever it had written and
                // not had answered; the requests fail as on any closed connection.
                *timed_out = true;
                *messages = Box::new(|_| Poll::Ready(None));
                let closed = runtime.block_on(inner.batch_execute(""));
                return Err(PipelineError::Before(closed.expect_err("a request on a dropped connection fails")));
            }
        };
        let mut answered = Vec::with_capacity(answers.len());
        for (at, answer) in answers.into_iter().enumerate() {
            match answer {
                Some(Ok(answer)) => answered.extend(answer),
                Some(Err(e)) if at < before => return Err(PipelineError::Before(e)),
                Some(Err(e)) => return Err(PipelineError::At(at - before, e)),
                None => unreachable!("a request is left unsent only after one that failed"),
            }
        }
        Ok(answered)
    }
}

/// The deferred `batch` as a request of a round trip.
fn batch_request<'a, T>(inner: &'a tokio_postgres::Client, batch: &'static str) -> Request<'a, T> {
    Box::pin(async move { inner.batch_execute(batch).await.map(|()| None) })
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
    runtime.block_on(async { tokio::time::timeout(deadline, waiting).await }).unwrap_or(Err(Waited::TimedOut))
}
