# Multi-stage build: the same Go version and the same flags as CI (`make build`),
# a static binary, and a final image with nothing else in it, run as non-root.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
# xxljob is a module of its own, required through a replace directive.
COPY xxljob/go.mod xxljob/go.sum xxljob/
RUN go mod download
COPY . .
# The build context has no .git: the version and commit come in as arguments
# (`make compose-up` and docker-compose.yml pass them).
ARG VERSION=dev
ARG COMMIT=unknown
RUN make build BIN=/out/executor VERSION="$VERSION" COMMIT="$COMMIT" && mkdir -p /out/logs

FROM scratch
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/
COPY --from=build /out/executor /executor
COPY --from=build --chown=65532:65532 /out/logs /data/logs
COPY config/jobs.yml /config/jobs.yml
USER 65532:65532
ENV XXL_JOB_EXECUTOR_LOGPATH=/data/logs/xxl-job \
    XXL_JOB_ADMIN_JOBSFILE=/config/jobs.yml
VOLUME ["/data/logs"]
EXPOSE 9999 9998
# serve refuses to start without XXL_JOB_ACCESS_TOKEN (docs/security.md);
# XXL_JOB_EXECUTOR_OPENWITHOUTTOKEN=true would bind it to the container's
# loopback, out of the admin's reach, unless XXL_JOB_EXECUTOR_BINDADDR is set.
ENTRYPOINT ["/executor"]
CMD ["serve"]
