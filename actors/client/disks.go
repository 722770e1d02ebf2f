package client

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/depot-dev/depot/actors"
	"github.com/depot-dev/depot/messages"
)

// nodeRequest sends msg to the actor named name on the node at addr (the
// first broker when addr is empty; a node id is looked up in the cluster's
// metadata) and checks the answer's type.
func nodeRequest[T any](ctx context.Context, c *Client, addr, name string, msg any) (T, error) {
	var zero T
	addr, err := c.nodeAddress(ctx, addr)
	if err != nil {
		return zero, err
	}
	res, err := c.request(ctx, actor.NewPID(addr, name), msg, c.contactTimeout())
	if errors.Is(err, ErrTimeout) || errors.Is(err, actor.ErrDeadLetter) || errors.Is(err, ErrConnectionLost) {
		return zero, fmt.Errorf("%w: %s", ErrUnreachable, addr)
	}
	if err != nil {
		return zero, err
	}
	c.contacted.Store(true)
	v, ok := res.(T)
	if !ok {
		return zero, fmt.Errorf("%w: %T from %s", ErrBadResponse, res, addr)
	}
	return v, nil
}

// nodeAddress is the actor address of node, given as an address or a node
// id; the first broker when empty.
func (c *Client) nodeAddress(ctx context.Context, node string) (string, error) {
	if node == "" {
		return c.cfg.brokers[0], nil
	}
	id, err := strconv.ParseInt(node, 10, 32)
	if err != nil {
		return node, nil
	}
	md, err := c.ClusterInfo(ctx)
	if err != nil {
		return "", err
	}
	for _, n := range md.GetNodes() {
		if int64(n.GetNodeId()) == id && n.GetAddress() != "" {
			return n.GetAddress(), nil
		}
	}
	return "", &Error{Code: messages.ErrorCode_BROKER_NOT_AVAILABLE, Message: fmt.Sprintf("node %d is not in the cluster", id)}
}

// DescribeLogDirs returns the log directories of the node at addr (the
// first broker when empty): state, partitions, bytes, capacity, free bytes
// and write rate of each.
func (c *Client) DescribeLogDirs(ctx context.Context, addr string) (*messages.DescribeLogDirsResponse, error) {
	resp, err := nodeRequest[*messages.DescribeLogDirsResponse](ctx, c, addr, actors.PlacementActorName, &messages.DescribeLogDirsRequest{})
	if err != nil {
		return nil, err
	}
	return resp, codeError(resp.Error, resp.ErrorMessage)
}

// AddLogDir adds the directory path, which must exist (capacity 0: as the
// file system says), to the running node at addr. force adds one on the
// file system of another log dir when neither declares a capacity.
func (c *Client) AddLogDir(ctx context.Context, addr, path string, capacity int64, force bool) error {
	resp, err := nodeRequest[*messages.AddLogDirResponse](ctx, c, addr, actors.PlacementActorName, &messages.AddLogDirRequest{Path: path, CapacityBytes: capacity, Force: force})
	if err != nil {
		return err
	}
	return codeError(resp.Error, resp.ErrorMessage)
}

// DrainLogDir starts moving every partition off the directory path of the
// node at addr, and returns the moves planned.
func (c *Client) DrainLogDir(ctx context.Context, addr, path string) ([]*messages.PartitionMove, error) {
	resp, err := nodeRequest[*messages.DrainLogDirResponse](ctx, c, addr, actors.PlacementActorName, &messages.DrainLogDirRequest{Path: path})
	if err != nil {
		return nil, err
	}
	return resp.Moves, codeError(resp.Error, resp.ErrorMessage)
}

// Balance returns the balancing plan of the node at addr; unless dryRun,
// the node starts carrying it out.
func (c *Client) Balance(ctx context.Context, addr string, dryRun bool) (*messages.BalanceResponse, error) {
	resp, err := nodeRequest[*messages.BalanceResponse](ctx, c, addr, actors.PlacementActorName, &messages.BalanceRequest{DryRun: dryRun})
	if err != nil {
		return nil, err
	}
	return resp, codeError(resp.Error, resp.ErrorMessage)
}

// UndrainLogDir undoes a drain of the directory path of the node at addr:
// it takes partitions again, and the moves off it not yet started are
// dropped.
func (c *Client) UndrainLogDir(ctx context.Context, addr, path string) error {
	resp, err := nodeRequest[*messages.UndrainLogDirResponse](ctx, c, addr, actors.PlacementActorName, &messages.UndrainLogDirRequest{Path: path})
	if err != nil {
		return err
	}
	return codeError(resp.Error, resp.ErrorMessage)
}

// RemoveLogDir removes the drained, empty directory path from the node at
// addr. Its files stay where they are.
func (c *Client) RemoveLogDir(ctx context.Context, addr, path string) error {
	resp, err := nodeRequest[*messages.RemoveLogDirResponse](ctx, c, addr, actors.PlacementActorName, &messages.RemoveLogDirRequest{Path: path})
	if err != nil {
		return err
	}
	return codeError(resp.Error, resp.ErrorMessage)
}
