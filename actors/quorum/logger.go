package quorum

import (
	"fmt"

	"github.com/sirupsen/logrus"
	"go.etcd.io/raft/v3"
)

// raftLogger is raft.Logger over a logrus entry, so raft logs where the
// node's actor logs and never through raft's process-wide default. Fatal
// logs at Error and panics rather than exit the process: the Peer turns the
// panic into an error that fails it. Raft's Info lines (every vote, every
// election round) log at Debug: the controller logs the changes of leader
// and configuration that matter at Info itself.
type raftLogger struct{ entry *logrus.Entry }

var _ raft.Logger = raftLogger{}

func (l raftLogger) Debug(v ...any)                 { l.entry.Debug(v...) }
func (l raftLogger) Debugf(format string, v ...any) { l.entry.Debugf(format, v...) }
func (l raftLogger) Info(v ...any)                  { l.entry.Debug(v...) }
func (l raftLogger) Infof(format string, v ...any)  { l.entry.Debugf(format, v...) }
func (l raftLogger) Warning(v ...any)               { l.entry.Warn(v...) }
func (l raftLogger) Warningf(format string, v ...any) {
	l.entry.Warnf(format, v...)
}
func (l raftLogger) Error(v ...any)                 { l.entry.Error(v...) }
func (l raftLogger) Errorf(format string, v ...any) { l.entry.Errorf(format, v...) }

func (l raftLogger) Fatal(v ...any) { l.Panic(v...) }
func (l raftLogger) Fatalf(format string, v ...any) {
	l.Panicf(format, v...)
}

func (l raftLogger) Panic(v ...any) {
	msg := fmt.Sprint(v...)
	l.entry.Error(msg)
	panic(raftPanic(msg))
}

func (l raftLogger) Panicf(format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	l.entry.Error(msg)
	panic(raftPanic(msg))
}

// raftPanic is the value raft panics with through a raftLogger: raft found
// its state impossible (a log that lost durable entries, a commit index out
// of range).
type raftPanic string
