"""What runs inside the builder stage (copied into the build context): the conda lock installer,
the trims measurement and the device-code pruner."""
