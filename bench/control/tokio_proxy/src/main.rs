// A TCP proxy on Tokio, what a user would write: one current-thread runtime (galay's tcp_proxy
// runs one worker too), TCP_NODELAY on both sockets, copy_bidirectional per connection.
//   tokio_proxy <listen-port> <upstream-ip:port>
use tokio::net::{TcpListener, TcpStream};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 3 {
        eprintln!("usage: tokio_proxy <listen-port> <upstream-ip:port>");
        std::process::exit(2);
    }
    let port: u16 = args[1].parse().unwrap_or_else(|_| {
        eprintln!("tokio_proxy: bad port {}", args[1]);
        std::process::exit(2)
    });
    let upstream = args[2].clone();
    let rt = tokio::runtime::Builder::new_current_thread().enable_io().build().unwrap();
    rt.block_on(async move {
        let listener = TcpListener::bind(("0.0.0.0", port)).await.unwrap_or_else(|e| {
            eprintln!("tokio_proxy: listen on {port}: {e}");
            std::process::exit(1)
        });
        println!("tokio_proxy: {port} -> {upstream}");
        loop {
            let (mut client, _) = match listener.accept().await {
                Ok(c) => c,
                Err(_) => continue,
            };
            let upstream = upstream.clone();
            tokio::spawn(async move {
                let mut server = match TcpStream::connect(&upstream).await {
                    Ok(s) => s,
                    Err(e) => {
                        eprintln!("tokio_proxy: connect {upstream}: {e}");
                        return;
                    }
                };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
            });
        }
    });
}
