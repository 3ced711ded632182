"""Replicas on this broker: Partition (leader/follower, ISR, high watermark, min-ISR), ReplicaManager (the
one owner of produce appends) and the follower fetcher.

Imports storage/, controller/ state values, config and errors; never server/ or coordinator/.
"""
