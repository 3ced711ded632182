# ZooKeeper from Debian's package, for pylog clusters in containers (ci/build_image.sh builds it).
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE}
RUN apt-get update \
    && apt-get install -y --no-install-recommends zookeeper \
    && rm -rf /var/lib/apt/lists/* \
    && mkdir -p /var/lib/zookeeper-data && chown zookeeper /var/lib/zookeeper-data \
    && printf '%s\n' 'tickTime=500' 'dataDir=/var/lib/zookeeper-data' 'clientPort=2181' \
        'admin.enableServer=false' 'maxClientCnxns=0' '4lw.commands.whitelist=ruok,stat,srvr' \
        > /etc/zookeeper/pylog-zoo.cfg
USER zookeeper
EXPOSE 2181
HEALTHCHECK --interval=5s --timeout=3s --start-period=10s --retries=3 \
    CMD ["bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/2181 && printf ruok >&3 && grep -q imok <&3"]
ENTRYPOINT ["java", "-Xmx256m", "-Dzookeeper.root.logger=INFO,CONSOLE", \
            "-cp", "/etc/zookeeper/conf:/usr/share/java/zookeeper.jar", \
            "org.apache.zookeeper.server.quorum.QuorumPeerMain", "/etc/zookeeper/pylog-zoo.cfg"]
