//! Counting a batch: on the blocking pool, so the async workers keep serving other requests
//! meanwhile, and split across the cores when the batch is large enough to pay for it.

use super::Tokenizer;

/// Below this many bytes of text a batch is counted in one blocking task; above it, the batch
/// is split so that every core counts a share.
pub const PARALLEL_COUNT_BYTES: usize = 64 * 1024;

/// Counts every item's tokens with `tokenizer` and returns each item with its cost, in the
/// order given. `cost` is the token cost of one item; `text_bytes` about how many bytes of text
/// `cost` reads, which only decides how the batch is shared between the cores.
///
/// The counting runs on tokio's blocking pool: a batch of less than [`PARALLEL_COUNT_BYTES`] of
/// text in one task, a larger one in one task per core, each counting a contiguous run of about
/// the same number of bytes. Fails only if a counting task panicked.
pub async fn count_all<T, C>(
    tokenizer: Tokenizer,
    items: Vec<T>,
    text_bytes: impl Fn(&T) -> usize,
    cost: C,
) -> Result<Vec<(T, i64)>, tokio::task::JoinError>
where
    T: Send + 'static,
    C: Fn(&T, Tokenizer) -> i64 + Clone + Send + 'static,
{
    let sizes: Vec<usize> = items.iter().map(&text_bytes).collect();
    let total: usize = sizes.iter().sum();
    let workers = if total < PARALLEL_COUNT_BYTES {
        1
    } else {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    };
    let tasks: Vec<_> = split_by_bytes(items, &sizes, total.div_ceil(workers).max(1))
        .into_iter()
        .map(|chunk| {
            let cost = cost.clone();
            tokio::task::spawn_blocking(move || {
                chunk
                    .into_iter()
                    .map(|item| {
                        let tokens = cost(&item, tokenizer);
                        (item, tokens)
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut counted = Vec::with_capacity(sizes.len());
    for task in tasks {
        counted.extend(task.await?);
    }
    Ok(counted)
}

/// Splits items, keeping their order, into runs of about `target` bytes each (`sizes` holds
/// each item's bytes). Never returns an empty run, except for no items at all.
fn split_by_bytes<T>(items: Vec<T>, sizes: &[usize], target: usize) -> Vec<Vec<T>> {
    let mut chunks: Vec<Vec<T>> = vec![Vec::new()];
    let mut bytes = 0;
    for (item, &size) in items.into_iter().zip(sizes) {
        if bytes >= target {
            chunks.push(Vec::new());
            bytes = 0;
        }
        bytes += size;
        if let Some(chunk) = chunks.last_mut() {
            chunk.push(item);
        }
    }
    chunks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_keep_the_order_and_hold_about_the_target() {
        let items: Vec<usize> = (0..10).collect();
        let sizes = [10; 10];
        let runs = split_by_bytes(items, &sizes, 30);
        assert_eq!(
            runs,
            vec![vec![0, 1, 2], vec![3, 4, 5], vec![6, 7, 8], vec![9]]
        );
        assert_eq!(
            split_by_bytes(Vec::<u8>::new(), &[], 1),
            vec![Vec::<u8>::new()]
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_item_is_counted_once_in_order_small_and_large() {
        let texts = |n: usize, len: usize| -> Vec<String> {
            (0..n).map(|i| format!("{i:>len$}")).collect()
        };
        // One task below the threshold; several above it (8 × 16 KB = 128 KB of text).
        for batch in [texts(5, 10), texts(8, 16 * 1024), Vec::new()] {
            let expected: Vec<(String, i64)> = batch
                .iter()
                .map(|t| (t.clone(), Tokenizer::Chars4.count(t)))
                .collect();
            let counted = count_all(Tokenizer::Chars4, batch, String::len, |t, tokenizer| {
                tokenizer.count(t)
            })
            .await
            .expect("counted");
            assert_eq!(counted, expected);
        }
    }

    #[tokio::test]
    async fn the_tokenizer_given_is_the_one_used() {
        let counted = count_all(
            Tokenizer::O200kBase,
            vec!["Hello, world!"],
            |t| t.len(),
            |t, tokenizer| tokenizer.count(t),
        )
        .await
        .expect("counted");
        assert_eq!(counted, vec![("Hello, world!", 4)]);
        let counted = count_all(
            Tokenizer::Chars4,
            vec!["héllo"],
            |t| t.len(),
            |t, k| k.count(t),
        )
        .await
        .expect("counted");
        assert_eq!(counted, vec![("héllo", 2)]);
    }
}
