package org.fairbench.elasticsearch;

import java.nio.file.Path;
import java.security.NoSuchAlgorithmException;
import java.util.List;
import java.util.Map;
import java.util.function.BiConsumer;
import java.util.function.Supplier;

import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLEngine;
import javax.net.ssl.SSLParameters;

import org.elasticsearch.common.network.NetworkService;
import org.elasticsearch.common.settings.ClusterSettings;
import org.elasticsearch.common.settings.Settings;
import org.elasticsearch.common.ssl.DefaultJdkTrustConfig;
import org.elasticsearch.common.ssl.PemKeyConfig;
import org.elasticsearch.common.ssl.SslClientAuthenticationMode;
import org.elasticsearch.common.ssl.SslConfiguration;
import org.elasticsearch.common.ssl.SslVerificationMode;
import org.elasticsearch.common.util.BigArrays;
import org.elasticsearch.common.util.PageCacheRecycler;
import org.elasticsearch.common.util.concurrent.ThreadContext;
import org.elasticsearch.http.HttpPreRequest;
import org.elasticsearch.http.HttpServerTransport;
import org.elasticsearch.http.netty4.Netty4HttpServerTransport;
import org.elasticsearch.indices.breaker.CircuitBreakerService;
import org.elasticsearch.plugins.NetworkPlugin;
import org.elasticsearch.plugins.Plugin;
import org.elasticsearch.telemetry.tracing.Tracer;
import org.elasticsearch.threadpool.ThreadPool;
import org.elasticsearch.transport.netty4.SharedGroupFactory;
import org.elasticsearch.transport.netty4.TLSConfig;

/**
 * HTTPS for the REST layer without the security plugin (which is not on Maven Central): the
 * netty4 HTTP transport given a TLS configuration, the constructor argument through which the
 * security plugin gives it one, built by Elasticsearch's own ssl-config library from the PEM
 * certificate and key named by the system properties fairbench.tls.cert and fairbench.tls.key.
 * Registered as the HTTP type `fairbench-netty4-tls`; node-to-node transport stays plain.
 */
public final class TlsPlugin extends Plugin implements NetworkPlugin {
    public static final String HTTP_TYPE = "fairbench-netty4-tls";

    private static TLSConfig tls(Path config) {
        PemKeyConfig key = new PemKeyConfig(System.getProperty("fairbench.tls.cert"),
            System.getProperty("fairbench.tls.key"), new char[0], config);
        // The JDK's default cipher suites and protocols (TLS 1.3 and 1.2), as a JDK server has them.
        SSLParameters defaults;
        try {
            defaults = SSLContext.getDefault().getDefaultSSLParameters();
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
        SslConfiguration ssl = new SslConfiguration("fairbench.tls", true, DefaultJdkTrustConfig.DEFAULT_INSTANCE, key,
            SslVerificationMode.NONE, SslClientAuthenticationMode.NONE, List.of(defaults.getCipherSuites()),
            List.of(defaults.getProtocols()));
        SSLContext context = ssl.createSslContext();
        return new TLSConfig(ssl, (configuration, host, port) -> {
            SSLEngine engine = context.createSSLEngine();
            engine.setUseClientMode(false);
            return engine;
        });
    }

    @Override
    public Map<String, Supplier<HttpServerTransport>> getHttpTransports(Settings settings, ThreadPool threadPool,
        BigArrays bigArrays, PageCacheRecycler pageCacheRecycler, CircuitBreakerService circuitBreakerService,
        org.elasticsearch.xcontent.NamedXContentRegistry xContentRegistry, NetworkService networkService,
        HttpServerTransport.Dispatcher dispatcher, BiConsumer<HttpPreRequest, ThreadContext> perRequestThreadContext,
        ClusterSettings clusterSettings, Tracer tracer) {
        Path config = Path.of(settings.get("path.home")).resolve("config");
        return Map.of(HTTP_TYPE, () -> new Netty4HttpServerTransport(settings, networkService, threadPool, xContentRegistry,
            dispatcher, clusterSettings, new SharedGroupFactory(settings), tracer, tls(config), null, null));
    }
}
