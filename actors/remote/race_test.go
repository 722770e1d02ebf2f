//go:build race

package remote

// raceEnabled is set when the tests run under the race detector, to which
// protoactor's Remote.Start is a data race with every other remote of the
// process: it sets gRPC's process-wide logger (grpclog.SetLoggerV2), which
// the gRPC goroutines of the remotes already started read unsynchronised.
const raceEnabled = true
