//! `etcdlock latch` and `etcdlock barrier`: core's count-down latch and
//! barrier for shell scripts and jobs in other languages.

use etcdlock::{Client, ClientOptions};

use crate::{exit, exit_code_for};

#[derive(clap::Args, Debug)]
pub struct LatchArgs {
    /// Latch name (escapes such as \n and \xHH are decoded)
    #[arg(value_parser = crate::parse_name)]
    pub name: String,
    /// The latch's count (every process gives the same)
    #[arg(long)]
    pub count: u64,
    /// Count down by one (a no-op at zero)
    #[arg(long)]
    pub count_down: bool,
    /// Wait until the count is zero
    #[arg(long)]
    pub wait: bool,
    /// Give up waiting after this long (exit 75): 500ms, 5s, 2m, or inf
    #[arg(long, value_parser = crate::parse_limit)]
    pub timeout: Option<crate::Limit>,
}

#[derive(clap::Args, Debug)]
pub struct BarrierArgs {
    /// Barrier name (escapes such as \n and \xHH are decoded)
    #[arg(value_parser = crate::parse_name)]
    pub name: String,
    /// How many parties the barrier waits for (every process gives the same)
    #[arg(long)]
    pub parties: u32,
    /// Give up waiting after this long (exit 75; this party leaves): 500ms, 5s, 2m, or inf
    #[arg(long, value_parser = crate::parse_limit)]
    pub timeout: Option<crate::Limit>,
}

async fn connect(opts: ClientOptions) -> Result<Client, i32> {
    Client::connect(opts).await.map_err(|e| {
        eprintln!("etcdlock: {e}");
        exit_code_for(&e)
    })
}

/// Open the latch, count down and/or wait; print the count. The handle is
/// closed and the client with it before exiting.
pub async fn latch(opts: ClientOptions, a: LatchArgs) -> i32 {
    let client = match connect(opts).await {
        Ok(c) => c,
        Err(code) => return code,
    };
    let r = async {
        let l = client.latch(&a.name, a.count).await?;
        let mut n = None;
        if a.count_down {
            n = Some(l.count_down().await?);
        }
        if a.wait {
            l.wait(a.timeout.and_then(crate::Limit::duration)).await?;
            n = Some(0);
        }
        let n = match n {
            Some(n) => n,
            None => l.count().await?,
        };
        l.close();
        Ok::<u64, etcdlock::Error>(n)
    }
    .await;
    client.close().await;
    match r {
        Ok(n) => {
            println!("{n}");
            0
        }
        Err(e) => {
            eprintln!("etcdlock: {e}");
            exit_code_for(&e)
        }
    }
}

/// Arrive at the barrier and wait for the others; print the arrival index.
pub async fn barrier(opts: ClientOptions, a: BarrierArgs) -> i32 {
    let client = match connect(opts).await {
        Ok(c) => c,
        Err(code) => return code,
    };
    let r = async {
        let b = client.barrier(&a.name, a.parties).await?;
        let i = b.wait(a.timeout.and_then(crate::Limit::duration)).await;
        b.close();
        i
    }
    .await;
    client.close().await;
    match r {
        Ok(i) => {
            println!("{i}");
            0
        }
        Err(e) => {
            eprintln!("etcdlock: {e}");
            if e.code() == etcdlock::ErrorCode::Timeout {
                exit::TIMEOUT
            } else {
                exit_code_for(&e)
            }
        }
    }
}
