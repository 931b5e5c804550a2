use super::sniff::{H2_PREFACE, proto_of};
use super::*;
use tokio::net::TcpStream;

#[test]
fn protocol_from_the_first_bytes() {
    assert_eq!(proto_of(b"GET / HTTP/1.1\r\n"), Some(Proto::Http1));
    assert_eq!(proto_of(b"G"), Some(Proto::Http1));
    assert_eq!(proto_of(b"PRI * HTTP/1.1"), Some(Proto::Http1));
    assert_eq!(proto_of(b"PRI * HTTP/2.0\r\n"), None);
    assert_eq!(proto_of(b""), None);
    assert_eq!(proto_of(H2_PREFACE), Some(Proto::H2));
    let mut more = H2_PREFACE.to_vec();
    more.extend_from_slice(b"\0\0\x12\x04");
    assert_eq!(proto_of(&more), Some(Proto::H2));
}

async fn pair() -> (LazyTcp, TcpStream) {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let l = crate::runtime::lazytcp::LazyListener::new(l).unwrap();
    let c = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
    (l.accept().await.unwrap().0, c)
}

#[tokio::test]
async fn request_start_reads_once_and_replays_the_bytes() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let (mut srv, mut cli) = pair().await;
    let req = b"GET /x HTTP/1.1\r\nHost: a\r\n\r\n";
    cli.write_all(req).await.unwrap();
    let (a, sd) = (Activity::new(), CancellationToken::new());
    let (p, first) = request_start(&mut srv, Duration::from_secs(5), &a, &sd)
        .await
        .unwrap();
    assert_eq!(p, Proto::Http1);
    let mut r = Replay::new(srv, first);
    cli.write_all(b"more").await.unwrap();
    let mut got = vec![0u8; req.len() + 4];
    r.read_exact(&mut got).await.unwrap();
    assert_eq!(&got[..req.len()], req, "the bytes read first come first");
    assert_eq!(&got[req.len()..], b"more");
}

#[tokio::test]
async fn request_start_waits_for_the_whole_h2_preface() {
    use tokio::io::AsyncWriteExt as _;
    let (mut srv, mut cli) = pair().await;
    let (a, sd) = (Activity::new(), CancellationToken::new());
    cli.write_all(&H2_PREFACE[..10]).await.unwrap();
    let rest = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        cli.write_all(&H2_PREFACE[10..]).await.unwrap();
        cli
    });
    let (p, first) = request_start(&mut srv, Duration::from_secs(5), &a, &sd)
        .await
        .unwrap();
    assert_eq!(p, Proto::H2);
    assert_eq!(&first[..], H2_PREFACE);
    drop(rest.await.unwrap());
}

#[tokio::test]
async fn request_start_ends_silent_clients() {
    let (mut srv, cli) = pair().await;
    let (a, sd) = (Activity::new(), CancellationToken::new());
    let r = request_start(&mut srv, Duration::from_millis(200), &a, &sd).await;
    assert!(matches!(r, Err(Ended::Silent)), "{r:?}");
    drop(cli);
}

/// A future that counts its polls and is ready once `go` is cancelled.
async fn counting(polls: &AtomicUsize, go: &CancellationToken) {
    let f = go.cancelled();
    tokio::pin!(f);
    std::future::poll_fn(|cx| {
        polls.fetch_add(1, Ordering::SeqCst);
        f.as_mut().poll(cx)
    })
    .await
}

#[tokio::test]
async fn quiet_polls_only_after_its_own_wakeup() {
    let polls = AtomicUsize::new(0);
    let go = CancellationToken::new();
    let q = Quiet::new(counting(&polls, &go));
    tokio::pin!(q);
    let noop = Waker::noop();
    let mut cx = Context::from_waker(noop);
    assert!(q.as_mut().poll(&mut cx).is_pending());
    assert_eq!(
        polls.load(Ordering::SeqCst),
        1,
        "the first poll goes through"
    );
    for _ in 0..5 {
        assert!(q.as_mut().poll(&mut cx).is_pending());
    }
    assert_eq!(
        polls.load(Ordering::SeqCst),
        1,
        "no wake-up of its own: not polled"
    );
    go.cancel();
    assert!(
        q.as_mut().poll(&mut cx).is_ready(),
        "woken: polled, and done"
    );
    assert_eq!(polls.load(Ordering::SeqCst), 2);
}

/// A request in flight whose writes wait ends the connection after
/// the stall timeout; progress in between starts the count again.
#[tokio::test(start_paused = true)]
async fn a_stalled_response_ends_after_the_write_timeout() {
    let a = Activity::new();
    let _req = a.begin();
    a.write_waits();
    tokio::time::advance(Duration::from_secs(20)).await;
    assert!(a.stalled_for().unwrap() >= Duration::from_secs(20));
    a.write_progressed();
    assert_eq!(a.stalled_for(), None);
    a.write_waits();
    tokio::time::advance(Duration::from_secs(1)).await;
    a.write_waits();
    let t = Instant::now();
    let why = quiet_out(&a, Duration::from_secs(10)).await;
    assert!(matches!(why, Ended::Stalled), "{why:?}");
    assert_eq!(t.elapsed(), WRITE_STALL_TIMEOUT - Duration::from_secs(1));
}

#[tokio::test(start_paused = true)]
async fn idle_time_counts_from_the_last_request() {
    let a = Activity::new();
    tokio::time::advance(Duration::from_secs(3)).await;
    assert!(a.idle_for().unwrap() >= Duration::from_secs(3));
    let r1 = a.begin();
    let r2 = a.begin();
    assert_eq!(a.idle_for(), None);
    drop(r1);
    assert_eq!(a.idle_for(), None, "one request still in flight");
    tokio::time::advance(Duration::from_secs(2)).await;
    drop(r2);
    assert!(a.idle_for().unwrap() < Duration::from_millis(10));
    let t = Instant::now();
    let why = quiet_out(&a, Duration::from_secs(10)).await;
    assert!(matches!(why, Ended::Idle), "{why:?}");
    assert!(t.elapsed() >= Duration::from_secs(10));
}
