//! Byte pumping between a client and a backend connection.
//!
//! Each direction copies until EOF, then shuts down the write side of the
//! other socket (TCP half-close is forwarded, so a client that sends its
//! request and `shutdown(SHUT_WR)`s still gets the whole response). The
//! connection ends when both directions reached EOF, when either side fails
//! (the other side is then dropped), or when no byte moved in either
//! direction for `idle`. Buffers start at 16 KiB and grow to 64 KiB for bulk
//! transfers.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio::time::Instant;

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

async fn pump<R, W>(mut r: R, mut w: W, act: &Activity) -> io::Result<u64>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut buf = vec![0u8; SMALL];
    let mut total = 0u64;
    loop {
        let n = r.read(&mut buf).await?;
        if n == 0 {
            // Forward the half-close; the peer may already be gone.
            match w.shutdown().await {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotConnected => {}
                Err(e) => return Err(e),
            }
            return Ok(total);
        }
        w.write_all(&buf[..n]).await?;
        act.touch();
        total += n as u64;
        if n == buf.len() && buf.len() < LARGE {
            buf.resize(LARGE, 0);
        }
    }
}

/// Why a proxied connection ended.
#[derive(Debug)]
pub enum End {
    /// Both directions finished; bytes client→backend, backend→client.
    Done(u64, u64),
    Idle,
    Error(io::Error),
}

/// Copy both ways between `client` and `backend` until both are done, one
/// fails, or both are idle for `idle`.
pub async fn splice(client: &mut TcpStream, backend: &mut TcpStream, idle: Duration) -> End {
    let act = Activity {
        epoch: Instant::now(),
        last_ms: AtomicU64::new(0),
    };
    let (cr, cw) = client.split();
    let (br, bw) = backend.split();
    let both = async { tokio::try_join!(pump(cr, bw, &act), pump(br, cw, &act)) };
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

    #[tokio::test]
    async fn half_close_is_forwarded_and_response_delivered() {
        let (mut client_outer, mut client_inner) = pair().await;
        let (mut backend_inner, mut backend_outer) = pair().await;
        let lb = tokio::spawn(async move {
            splice(
                &mut client_inner,
                &mut backend_inner,
                Duration::from_secs(5),
            )
            .await
        });
        client_outer.write_all(b"request").await.unwrap();
        client_outer.shutdown().await.unwrap();
        // The backend sees the request and then EOF.
        let mut got = Vec::new();
        backend_outer.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, b"request");
        let big = vec![7u8; 300_000];
        backend_outer.write_all(&big).await.unwrap();
        backend_outer.shutdown().await.unwrap();
        let mut resp = Vec::new();
        client_outer.read_to_end(&mut resp).await.unwrap();
        assert_eq!(resp.len(), big.len());
        match lb.await.unwrap() {
            End::Done(up, down) => assert_eq!((up, down), (7, 300_000)),
            other => panic!("{other:?}"),
        }
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
            ),
        )
        .await
        .unwrap();
        assert!(matches!(end, End::Idle), "{end:?}");
    }
}
