module fairbench.local/parity-clients

go 1.24.0

require (
	github.com/eclipse/paho.mqtt.golang v1.5.1
	github.com/gocql/gocql v1.7.0
)

require (
	github.com/golang/snappy v0.0.3 // indirect
	github.com/gorilla/websocket v1.5.3 // indirect
	github.com/hailocab/go-hostpool v0.0.0-20160125115350-e80d13ce29ed // indirect
	golang.org/x/net v0.44.0 // indirect
	golang.org/x/sync v0.17.0 // indirect
	gopkg.in/inf.v0 v0.9.1 // indirect
)
