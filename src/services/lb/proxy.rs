//! Byte pumping between a client and a backend connection.
//!
//! Each direction forwards until EOF, then shuts down the write side of the
//! other socket (TCP half-close is forwarded, so a client that sends its
//! request and `shutdown(SHUT_WR)`s still gets the whole response). The
//! connection ends when both directions reached EOF, when either side fails
//! (the other side is then dropped), or when no byte moved in either
//! direction for `idle`.
//!
//! A direction starts by copying through a 16 KiB buffer. The first read
//! that fills it marks bulk traffic, and the direction switches to
//! zero-copy forwarding: `splice(2)` socket → pipe → socket ([`pipe`]),
//! driven by tokio's readiness (`readable`/`writable` + `try_io`). A pipe
//! is leased from the pool only while bytes flow (from the source's
//! readiness until it would block, the pipe drained), so idle keep-alive
//! connections hold none. The direction copies instead (buffer grown to
//! 64 KiB) when the pool is exhausted, and for good when splice is refused
//! (`EINVAL`/`ENOSYS` from a splice into the pipe, which is empty then; a
//! refusal on the way out, never seen for TCP, fails the connection).
//! Small request/response traffic never takes a pipe. Byte counts,
//! the idle timer, half-close and cancellation (the future is dropped:
//! a pipe with bytes still in it is closed, an empty one is pooled) are
//! the same in both modes.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _, Interest};
use tokio::net::TcpStream;
use tokio::net::tcp::{ReadHalf, WriteHalf};
use tokio::time::Instant;

use super::pipe::{self, Lease, Pool};

const SMALL: usize = 16 * 1024;
const LARGE: usize = 64 * 1024;

/// Milliseconds since `epoch` of the last byte moved.
struct Activity {
    epoch: Instant,
    last_ms: AtomicU64,
}

impl Activity {
    fn touch(&self) {
        let ms = self.epoch.elapsed().as_millis() as u64;
        self.last_ms.store(ms, Ordering::Relaxed);
    }
    fn deadline(&self, idle: Duration) -> Instant {
        self.epoch + Duration::from_millis(self.last_ms.load(Ordering::Relaxed)) + idle
    }
}

/// One direction: `r` → `w`, then forward the half-close. Bytes moved.
async fn pump(
    mut r: ReadHalf<'_>,
    mut w: WriteHalf<'_>,
    act: &Activity,
    pipes: &Pool,
) -> io::Result<u64> {
    let mut buf = vec![0u8; SMALL];
    let mut total = 0u64;
    let mut spliceable = true;
    loop {
        let n = r.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        w.write_all(&buf[..n]).await?;
        act.touch();
        total += n as u64;
        if n < buf.len() {
            continue;
        }
        if spliceable {
            match splice_phase(r.as_ref(), w.as_ref(), pipes, act, &mut total).await? {
                Phase::Eof => break,
                Phase::NoPipe => {}
                Phase::Unsupported => spliceable = false,
            }
        }
        if buf.len() < LARGE {
            buf.resize(LARGE, 0);
        }
    }
    // Forward the half-close; the peer may already be gone.
    match w.shutdown().await {
        Ok(()) => Ok(total),
        Err(e) if e.kind() == io::ErrorKind::NotConnected => Ok(total),
        Err(e) => Err(e),
    }
}

/// How a splice phase ended (the pipe is empty in every case).
#[derive(Debug, PartialEq, Eq)]
enum Phase {
    /// `from` reached end of file.
    Eof,
    /// The pool had no pipe: copy.
    NoPipe,
    /// Splice refused these descriptors: copy from now on.
    Unsupported,
}

/// Splice `from` → `to` until EOF, leasing a pipe from `pipes` for each
/// burst (from readiness until `from` would block).
async fn splice_phase(
    from: &TcpStream,
    to: &TcpStream,
    pipes: &Pool,
    act: &Activity,
    total: &mut u64,
) -> io::Result<Phase> {
    loop {
        from.readable().await?;
        let Some(mut lease) = pipes.take() else {
            return Ok(Phase::NoPipe);
        };
        loop {
            match from.try_io(Interest::READABLE, || lease.get()?.fill_from(from)) {
                Ok(0) => return Ok(Phase::Eof),
                Ok(_) => drain(&mut lease, to, act, total).await?,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if pipe::unsupported(&e) => return Ok(Phase::Unsupported),
                Err(e) => return Err(e),
            }
        }
    }
}

/// Splice everything in the pipe into `to`.
async fn drain(
    lease: &mut Lease<'_>,
    to: &TcpStream,
    act: &Activity,
    total: &mut u64,
) -> io::Result<()> {
    while lease.held() > 0 {
        to.writable().await?;
        match to.try_io(Interest::WRITABLE, || lease.get()?.drain_to(to)) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                act.touch();
                *total += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Why a proxied connection ended.
#[derive(Debug)]
pub enum End {
    /// Both directions finished; bytes client→backend, backend→client.
    Done(u64, u64),
    Idle,
    Error(io::Error),
}

/// Forward both ways between `client` and `backend` until both are done,
/// one fails, or both are idle for `idle`; bulk bytes go through pipes
/// leased from `pipes`.
pub async fn splice(
    client: &mut TcpStream,
    backend: &mut TcpStream,
    idle: Duration,
    pipes: &Pool,
) -> End {
    let act = Activity {
        epoch: Instant::now(),
        last_ms: AtomicU64::new(0),
    };
    let (cr, cw) = client.split();
    let (br, bw) = backend.split();
    let both = async { tokio::try_join!(pump(cr, bw, &act, pipes), pump(br, cw, &act, pipes)) };
    let watchdog = async {
        loop {
            let deadline = act.deadline(idle);
            if Instant::now() >= deadline {
                return;
            }
            tokio::time::sleep_until(deadline).await;
        }
    };
    tokio::select! {
        biased;
        r = both => match r {
            Ok((up, down)) => End::Done(up, down),
            Err(e) => End::Error(e),
        },
        _ = watchdog => End::Idle,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpListener;

    async fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        let (b, _) = l.accept().await.unwrap();
        (a, b)
    }

    /// client_outer ⇄ [client_inner | LB | backend_inner] ⇄ backend_outer;
    /// the LB runs with `pipes` (leaked: tests outlive nothing).
    async fn proxied(
        pipes: &'static Pool,
        idle: Duration,
    ) -> (TcpStream, TcpStream, tokio::task::JoinHandle<End>) {
        let (client_outer, mut client_inner) = pair().await;
        let (mut backend_inner, backend_outer) = pair().await;
        let lb = tokio::spawn(async move {
            splice(&mut client_inner, &mut backend_inner, idle, pipes).await
        });
        (client_outer, backend_outer, lb)
    }

    fn pool(max: usize) -> &'static Pool {
        Box::leak(Box::new(Pool::new(max)))
    }

    /// Deterministic, position-dependent bytes (a shifted or dropped chunk
    /// shows).
    fn body(len: usize, seed: u8) -> Vec<u8> {
        (0..len)
            .map(|i| (i as u32).wrapping_mul(2_654_435_761).to_le_bytes()[3] ^ seed)
            .collect()
    }

    /// Send `data` on `w`, half-close, while reading `r` to its end.
    async fn exchange(s: TcpStream, data: Vec<u8>) -> Vec<u8> {
        let (mut r, mut w) = s.into_split();
        let send = tokio::spawn(async move {
            w.write_all(&data).await.unwrap();
            w.shutdown().await.unwrap();
        });
        let mut got = Vec::new();
        r.read_to_end(&mut got).await.unwrap();
        send.await.unwrap();
        got
    }

    async fn both_ways(pipes: &'static Pool, up: usize, down: usize) {
        let (client, backend, lb) = proxied(pipes, Duration::from_secs(30)).await;
        let (req, resp) = (body(up, 1), body(down, 2));
        let (at_backend, at_client) = tokio::join!(
            exchange(backend, resp.clone()),
            exchange(client, req.clone())
        );
        assert!(at_backend == req, "client→backend bytes differ");
        assert!(at_client == resp, "backend→client bytes differ");
        match lb.await.unwrap() {
            End::Done(u, d) => assert_eq!((u, d), (up as u64, down as u64)),
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn large_bodies_both_ways_are_spliced_intact() {
        let pipes = pool(4);
        both_ways(pipes, 24 << 20, 40 << 20).await;
        // Bulk bytes went through pipes, and both came back empty.
        assert!(pipes.live() >= 1, "no pipe was used");
        assert_eq!(pipes.idle(), pipes.live());
    }

    #[tokio::test]
    async fn without_pipes_bytes_are_copied_intact() {
        let pipes = pool(0);
        both_ways(pipes, 3 << 20, 5 << 20).await;
        assert_eq!(pipes.live(), 0);
    }

    #[tokio::test]
    async fn one_pipe_for_two_bulk_directions_copies_the_other_intact() {
        let pipes = pool(1);
        both_ways(pipes, 16 << 20, 16 << 20).await;
        assert_eq!((pipes.live(), pipes.idle()), (1, 1));
    }

    #[tokio::test]
    async fn small_exchanges_take_no_pipe() {
        let pipes = pool(4);
        both_ways(pipes, 100, 2000).await;
        assert_eq!(pipes.live(), 0);
    }

    #[tokio::test]
    async fn half_close_is_forwarded_and_response_delivered() {
        let pipes = pool(4);
        let (mut client_outer, mut backend_outer, lb) =
            proxied(pipes, Duration::from_secs(5)).await;
        client_outer.write_all(b"request").await.unwrap();
        client_outer.shutdown().await.unwrap();
        // The backend sees the request and then EOF.
        let mut got = Vec::new();
        backend_outer.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, b"request");
        // A bulk response after the request's half-close (spliced).
        let big = body(3_000_000, 3);
        backend_outer.write_all(&big).await.unwrap();
        backend_outer.shutdown().await.unwrap();
        let mut resp = Vec::new();
        client_outer.read_to_end(&mut resp).await.unwrap();
        assert!(resp == big, "response differs");
        match lb.await.unwrap() {
            End::Done(up, down) => assert_eq!((up, down), (7, 3_000_000)),
            other => panic!("{other:?}"),
        }
        assert_eq!((pipes.live(), pipes.idle()), (1, 1));
    }

    /// The backend resets the connection in the middle of a bulk upload:
    /// the LB ends with an error (the client is dropped), and a pipe that
    /// still held bytes is closed, not pooled.
    #[tokio::test]
    async fn peer_reset_mid_transfer_ends_the_connection() {
        let pipes = pool(4);
        let (client_outer, backend_outer, lb) = proxied(pipes, Duration::from_secs(30)).await;
        let (mut cr, mut cw) = client_outer.into_split();
        let upload = tokio::spawn(async move {
            let chunk = body(1 << 20, 4);
            // Until the LB drops the client (broken pipe / reset).
            for _ in 0..512 {
                if cw.write_all(&chunk).await.is_err() {
                    return true;
                }
            }
            false
        });
        let mut backend_outer = backend_outer;
        let mut first = vec![0u8; 1 << 20];
        backend_outer.read_exact(&mut first).await.unwrap();
        assert!(first == body(1 << 20, 4), "first MiB differs");
        socket2::SockRef::from(&backend_outer)
            .set_linger(Some(Duration::ZERO))
            .unwrap();
        drop(backend_outer); // RST
        let end = tokio::time::timeout(Duration::from_secs(10), lb)
            .await
            .unwrap()
            .unwrap();
        assert!(matches!(end, End::Error(_)), "{end:?}");
        // The client sees its connection closed.
        let mut rest = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(10), cr.read_to_end(&mut rest)).await;
        assert!(
            tokio::time::timeout(Duration::from_secs(10), upload)
                .await
                .unwrap()
                .unwrap()
        );
        assert_eq!(pipes.live(), pipes.idle(), "a leased pipe was not returned");
    }

    /// Cancelling a spliced connection (shutdown drain, reload cut) frees
    /// its pipes: pooled when empty, closed when holding bytes.
    #[tokio::test]
    async fn cancellation_returns_or_closes_pipes() {
        let pipes = pool(4);
        let (client_outer, mut backend_outer, lb) = proxied(pipes, Duration::from_secs(30)).await;
        let (_cr, mut cw) = client_outer.into_split();
        let chunk = body(1 << 20, 5);
        // Fill the path: the backend does not read, so the LB blocks in
        // a splice direction with bytes in its pipe.
        let writer = tokio::spawn(async move {
            for _ in 0..64 {
                if cw.write_all(&chunk).await.is_err() {
                    break;
                }
            }
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(pipes.live() >= 1, "the upload was not spliced");
        lb.abort();
        let _ = lb.await;
        assert_eq!(pipes.live(), pipes.idle(), "a pipe stayed leased");
        writer.abort();
        let mut buf = vec![0u8; 4096];
        let _ = backend_outer.read(&mut buf).await;
    }

    #[tokio::test]
    async fn idle_connections_are_closed() {
        let (_client_outer, mut client_inner) = pair().await;
        let (mut backend_inner, _backend_outer) = pair().await;
        let end = tokio::time::timeout(
            Duration::from_secs(10),
            splice(
                &mut client_inner,
                &mut backend_inner,
                Duration::from_millis(200),
                pool(4),
            ),
        )
        .await
        .unwrap();
        assert!(matches!(end, End::Idle), "{end:?}");
    }

    /// A bulk transfer that then goes quiet is still closed when idle (the
    /// splice phase waits for readiness without touching the timer).
    #[tokio::test]
    async fn idle_after_bulk_is_closed() {
        let pipes = pool(4);
        let (mut client_outer, mut backend_outer, lb) =
            proxied(pipes, Duration::from_millis(300)).await;
        let big = body(1 << 20, 6);
        client_outer.write_all(&big).await.unwrap();
        let mut got = vec![0u8; big.len()];
        backend_outer.read_exact(&mut got).await.unwrap();
        assert!(got == big);
        let end = tokio::time::timeout(Duration::from_secs(10), lb)
            .await
            .unwrap()
            .unwrap();
        assert!(matches!(end, End::Idle), "{end:?}");
        assert_eq!(pipes.live(), pipes.idle());
    }
}
