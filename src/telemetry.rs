//! Logs and traces: one line per event on stdout (text, or JSON with `CTXD_LOG_FORMAT=json`),
//! and, when an OTLP endpoint is configured, every span (one per request, with its method,
//! route and request id) exported to an OpenTelemetry collector over OTLP/HTTP.

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer, Registry};

use crate::config::LogFormat;

/// What must be flushed when the process stops.
pub struct Telemetry {
    traces: Option<SdkTracerProvider>,
}

impl Telemetry {
    /// Exports the spans still buffered (within the exporter's timeout).
    pub fn shutdown(self) {
        if let Some(provider) = self.traces {
            // The exporter's blocking HTTP client must not be dropped on an async thread.
            let _ = std::thread::spawn(move || provider.shutdown()).join();
        }
    }
}

/// Where spans go: `endpoint` is the collector's base URL (`http://collector:4318`; spans are
/// sent to `/v1/traces` under it) or the whole traces URL.
fn traces_url(endpoint: &str) -> String {
    let endpoint = endpoint.trim_end_matches('/');
    if endpoint.ends_with("/v1/traces") {
        endpoint.to_owned()
    } else {
        format!("{endpoint}/v1/traces")
    }
}

/// Installs the process's subscriber: levels from `RUST_LOG` (default `info`), logs to stdout,
/// spans to `otlp_endpoint` when given.
pub fn init(format: LogFormat, otlp_endpoint: Option<&str>) -> Result<Telemetry, String> {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    // Colours only on a terminal: a file or a log collector gets plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stdout());
    let logs: Box<dyn Layer<Registry> + Send + Sync> = match format {
        LogFormat::Text => tracing_subscriber::fmt::layer().with_ansi(ansi).boxed(),
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .json()
            .with_ansi(false)
            .boxed(),
    };
    let traces = match otlp_endpoint.filter(|e| !e.trim().is_empty()) {
        Some(endpoint) => Some(tracer_provider(&traces_url(endpoint))?),
        None => None,
    };
    let spans = traces.as_ref().map(|provider| {
        tracing_opentelemetry::layer()
            .with_tracer(provider.tracer("ctxd"))
            .boxed()
    });
    tracing_subscriber::registry()
        .with(logs)
        .with(spans)
        .with(filter)
        .try_init()
        .map_err(|e| format!("cannot install the log subscriber: {e}"))?;
    if let Some(endpoint) = otlp_endpoint.filter(|e| !e.trim().is_empty()) {
        tracing::info!(endpoint = %traces_url(endpoint), "traces exported over OTLP/HTTP");
    }
    Ok(Telemetry { traces })
}

/// The exporter's HTTP client: reqwest's blocking one, on the batch processor's own thread.
#[derive(Debug)]
struct Blocking(reqwest::blocking::Client);

#[async_trait::async_trait]
impl HttpClient for Blocking {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let (parts, body) = request.into_parts();
        let sent = self
            .0
            .request(parts.method, parts.uri.to_string())
            .headers(parts.headers)
            .body(body.to_vec())
            .send()?;
        let status = sent.status();
        let headers = sent.headers().clone();
        let mut response = Response::builder().status(status).body(sent.bytes()?)?;
        *response.headers_mut() = headers;
        Ok(response)
    }
}

fn tracer_provider(url: &str) -> Result<SdkTracerProvider, String> {
    let url = url.to_owned();
    // The exporter's blocking HTTP client is built (and later dropped) off the async runtime.
    std::thread::spawn(move || {
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_endpoint(url.clone())
            .with_http_client(Blocking(
                reqwest::blocking::Client::builder()
                    .timeout(std::time::Duration::from_secs(10))
                    .build()
                    .map_err(|e| format!("OTLP client: {e}"))?,
            ))
            .build()
            .map_err(|e| format!("OTLP endpoint {url}: {e}"))?;
        let resource = opentelemetry_sdk::Resource::builder()
            .with_service_name("ctxd")
            .build();
        Ok(SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource)
            .build())
    })
    .join()
    .map_err(|_| "building the OTLP exporter failed".to_owned())?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_endpoint_is_a_base_or_the_traces_url() {
        assert_eq!(
            traces_url("http://collector:4318"),
            "http://collector:4318/v1/traces"
        );
        assert_eq!(
            traces_url("http://collector:4318/"),
            "http://collector:4318/v1/traces"
        );
        assert_eq!(
            traces_url("https://otel.example/v1/traces"),
            "https://otel.example/v1/traces"
        );
    }
}
