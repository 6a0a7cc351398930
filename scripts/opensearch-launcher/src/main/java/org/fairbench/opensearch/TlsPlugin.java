package org.fairbench.opensearch;

import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyStore;
import java.util.Optional;

import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLEngine;
import javax.net.ssl.SSLException;

import org.opensearch.common.settings.Settings;
import org.opensearch.http.HttpServerTransport;
import org.opensearch.plugins.Plugin;
import org.opensearch.plugins.SecureHttpTransportSettingsProvider;
import org.opensearch.plugins.SecureSettingsFactory;
import org.opensearch.plugins.SecureTransportSettingsProvider;
import org.opensearch.plugins.TransportExceptionHandler;

/**
 * HTTPS for the REST layer through OpenSearch's own extension point (the one the security
 * plugin uses): a server SSLEngine from a PKCS#12 key store named by the system properties
 * fairbench.tls.keystore and fairbench.tls.password. Node-to-node transport stays plain.
 */
public final class TlsPlugin extends Plugin {
    private final SSLContext context;

    public TlsPlugin() throws Exception {
        String path = System.getProperty("fairbench.tls.keystore");
        char[] password = System.getProperty("fairbench.tls.password", "").toCharArray();
        KeyStore store = KeyStore.getInstance("PKCS12");
        try (InputStream in = Files.newInputStream(Path.of(path))) {
            store.load(in, password);
        }
        KeyManagerFactory keys = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
        keys.init(store, password);
        context = SSLContext.getInstance("TLS");
        context.init(keys.getKeyManagers(), null, null);
    }

    @Override
    public Optional<SecureSettingsFactory> getSecureSettingFactory(Settings settings) {
        return Optional.of(new SecureSettingsFactory() {
            @Override
            public Optional<SecureTransportSettingsProvider> getSecureTransportSettingsProvider(Settings s) {
                return Optional.empty();
            }

            @Override
            public Optional<SecureHttpTransportSettingsProvider> getSecureHttpTransportSettingsProvider(Settings s) {
                return Optional.of(new SecureHttpTransportSettingsProvider() {
                    @Override
                    public Optional<TransportExceptionHandler> buildHttpServerExceptionHandler(
                        Settings s2, HttpServerTransport transport) {
                        return Optional.empty();
                    }

                    @Override
                    public Optional<SSLEngine> buildSecureHttpServerEngine(Settings s2, HttpServerTransport transport)
                        throws SSLException {
                        SSLEngine engine = context.createSSLEngine();
                        engine.setUseClientMode(false);
                        return Optional.of(engine);
                    }
                });
            }
        });
    }
}
