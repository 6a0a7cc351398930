package org.fairbench.elasticsearch;

import java.util.Collection;
import java.util.List;
import java.util.function.Predicate;
import java.util.function.Supplier;

import org.elasticsearch.Build;
import org.elasticsearch.cluster.ClusterState;
import org.elasticsearch.cluster.metadata.IndexNameExpressionResolver;
import org.elasticsearch.cluster.node.DiscoveryNodes;
import org.elasticsearch.cluster.service.ClusterService;
import org.elasticsearch.common.io.stream.NamedWriteableRegistry;
import org.elasticsearch.common.settings.ClusterSettings;
import org.elasticsearch.common.settings.IndexScopedSettings;
import org.elasticsearch.common.settings.Settings;
import org.elasticsearch.common.settings.SettingsFilter;
import org.elasticsearch.features.NodeFeature;
import org.elasticsearch.index.IndexVersion;
import org.elasticsearch.plugins.ActionPlugin;
import org.elasticsearch.plugins.Plugin;
import org.elasticsearch.rest.BaseRestHandler;
import org.elasticsearch.rest.RestController;
import org.elasticsearch.rest.RestHandler;
import org.elasticsearch.rest.RestRequest;
import org.elasticsearch.rest.RestResponse;
import org.elasticsearch.rest.RestStatus;
import org.elasticsearch.xcontent.XContentBuilder;

/**
 * GET / and HEAD /, as Elasticsearch's rest-root module answers them (name, cluster, version
 * with build flavour and type, Lucene version, tagline). That module ships only inside the
 * distribution, not on Maven Central, so the launcher serves the same document from the
 * node's own Build, IndexVersion and cluster state.
 */
public final class RootPlugin extends Plugin implements ActionPlugin {
    private volatile ClusterService clusterService;

    @Override
    public Collection<?> createComponents(PluginServices services) {
        clusterService = services.clusterService();
        return List.of();
    }

    @Override
    public Collection<RestHandler> getRestHandlers(Settings settings, NamedWriteableRegistry registry, RestController controller,
        ClusterSettings clusterSettings, IndexScopedSettings indexScopedSettings, SettingsFilter settingsFilter,
        IndexNameExpressionResolver resolver, Supplier<DiscoveryNodes> nodes, Predicate<NodeFeature> features) {
        return List.of(new BaseRestHandler() {
            @Override
            public String getName() {
                return "main_action";
            }

            @Override
            public List<Route> routes() {
                return List.of(new Route(RestRequest.Method.GET, "/"), new Route(RestRequest.Method.HEAD, "/"));
            }

            @Override
            protected RestChannelConsumer prepareRequest(RestRequest request, org.elasticsearch.client.internal.node.NodeClient client) {
                return channel -> {
                    ClusterState state = clusterService.state();
                    Build build = Build.current();
                    XContentBuilder body = channel.newBuilder();
                    body.startObject();
                    body.field("name", clusterService.getNodeName());
                    body.field("cluster_name", state.getClusterName().value());
                    body.field("cluster_uuid", state.metadata().clusterUUID());
                    body.startObject("version")
                        .field("number", build.qualifiedVersion())
                        .field("build_flavor", build.flavor())
                        .field("build_type", build.type().displayName())
                        .field("build_hash", build.hash())
                        .field("build_date", build.date())
                        .field("build_snapshot", build.isSnapshot())
                        .field("lucene_version", IndexVersion.current().luceneVersion().toString())
                        .field("minimum_wire_compatibility_version", build.minWireCompatVersion())
                        .field("minimum_index_compatibility_version", build.minIndexCompatVersion())
                        .endObject();
                    body.field("tagline", "You Know, for Search");
                    body.endObject();
                    channel.sendResponse(new RestResponse(RestStatus.OK, body));
                };
            }
        });
    }
}
