//! JUnit writer: one testsuite per cell, one testcase per leaf KTAP test.
