# syntax=docker/dockerfile:1
# Berth's container image: the static berth binary on no base, run as a numeric non-root
# user, with a read-only root file system. make image builds the same image without a
# container engine (cmd/berth-image); internal/ociimage's test holds the two to the same
# entrypoint, command, user, environment, working directory and labels.
#
#   docker build --build-arg VERSION="$(git describe --tags --always --dirty)" \
#     --build-arg REVISION="$(git rev-parse HEAD)" -t berth .
#   docker run --read-only --tmpfs /tmp -v berth-state:/var/lib/berth berth

FROM golang:1.26.8-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
# The same build as make image's: static (no cgo), without local paths, stamped with VERSION.
RUN mkdir -p /rootfs/usr/local/bin \
 && CGO_ENABLED=0 go build -trimpath -buildvcs=false \
      -ldflags "-s -w -X main.version=${VERSION}" -o /rootfs/usr/local/bin/berth ./cmd/agent
# The rest of the root file system: the root certificates, the agent's user, /tmp for
# SQLite's temporary files and the state directory for the embedded store, the user's own.
RUN mkdir -p /rootfs/etc/ssl/certs /rootfs/tmp /rootfs/var/lib/berth \
 && cp /etc/ssl/certs/ca-certificates.crt /rootfs/etc/ssl/certs/ca-certificates.crt \
 && printf 'root:x:0:0:root:/root:/sbin/nologin\nberth:x:65532:65532:berth:/var/lib/berth:/sbin/nologin\n' >/rootfs/etc/passwd \
 && printf 'root:x:0:\nberth:x:65532:\n' >/rootfs/etc/group \
 && chmod 1777 /rootfs/tmp \
 && chown 65532:65532 /rootfs/var/lib/berth && chmod 700 /rootfs/var/lib/berth

FROM scratch
# COPY --from keeps the owners set above (the state directory is 65532's).
COPY --from=build /rootfs/ /
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title="berth"
LABEL org.opencontainers.image.description="Berth's control-plane agent and CLI"
LABEL org.opencontainers.image.source="https://github.com/berth-dev/berth"
LABEL org.opencontainers.image.url="https://github.com/berth-dev/berth"
LABEL org.opencontainers.image.version="${VERSION}"
LABEL org.opencontainers.image.revision="${REVISION}"
ENV PATH=/usr/local/bin:/usr/bin:/bin
# The embedded store's default file is then /var/lib/berth/berth.db.
ENV XDG_STATE_HOME=/var/lib
USER 65532:65532
WORKDIR /
VOLUME ["/var/lib/berth"]
ENTRYPOINT ["berth"]
CMD ["run"]
