package client

import (
	"context"

	"github.com/depot-dev/depot/messages"
)

// ElectLeaders has the controller make each partition's preferred replica
// (its first) its leader again where that replica is live and in the ISR,
// as Kafka's preferred leader election: the partitions of topic, only those
// listed when any are, or every topic's when topic is "". Each partition's
// outcome is in the answer: ELECTION_NOT_NEEDED where its preferred
// replica leads already, PREFERRED_LEADER_NOT_AVAILABLE where it cannot.
func (c *Client) ElectLeaders(ctx context.Context, topic string, partitions ...int32) ([]*messages.ElectionResult, error) {
	req := &messages.ElectLeadersRequest{Topic: topic, Partitions: partitions}
	res, err := c.adminChange(ctx, req, func() {})
	if err != nil {
		return nil, err
	}
	r, err := answer[*messages.ElectLeadersResponse](res, req)
	if err != nil {
		return nil, err
	}
	if topic != "" {
		c.forget(topic)
	}
	return r.GetResults(), nil
}
