# Build: a static binary (no cgo), then a minimal image running as non-root.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/vstream-gateway ./cmd/vstream-gateway

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/vstream-gateway /usr/local/bin/vstream-gateway
USER nonroot:nonroot
EXPOSE 8080
VOLUME ["/data"]
ENV VSG_DATA_DIR=/data
ENTRYPOINT ["/usr/local/bin/vstream-gateway"]
